// What every part of the Python module includes: pybind11, the tool's readers of checkpoints,
// texts and budgets (tools/locost/), and the library.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tools/locost/budget.hpp>
#include <tools/locost/eval_report.hpp>
#include <tools/locost/device.hpp>
#include <tools/locost/gen_flags.hpp>
#include <tools/locost/input.hpp>
#include <tools/locost/progress.hpp>
#include <locost/backend/cpu/signal_shield.hpp>
#include <locost/io/printable.hpp>
#include <locost/options/readers.hpp>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace locost::python {

using clock = std::chrono::steady_clock;

}  // namespace locost::python
