// The CUDA runtime as tests/cuda_emulator emulates it on the host (see emulator.hpp).
#pragma once
#include "emulator.hpp"
