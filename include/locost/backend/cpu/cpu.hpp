// Everything the CPU backend specialises; included by the umbrella header.
#pragma once
#include "threads.hpp"
#include "gemm.hpp"
#include "linear.hpp"
#include "elementwise.hpp"
#include "fft.hpp"
#include "bidirectional_conv.hpp"
#include "ssm_kernels.hpp"
#include "attention.hpp"
#include "shared_kv_attention.hpp"
#include "copy.hpp"
#include "rows.hpp"
#include "signal_shield.hpp"
