#include "ops/cuda/dependent_launch.h"

#include <atomic>

namespace day0 {
namespace {
std::atomic<bool> g_dependent_launch{true};
}  // namespace

void set_dependent_launch(bool on) { g_dependent_launch.store(on, std::memory_order_relaxed); }
bool dependent_launch_enabled() { return g_dependent_launch.load(std::memory_order_relaxed); }

}  // namespace day0
