// A parallel loop for short passes (a boundary's rounding, its replay): the calling thread
// starts at once and helper threads join it as they wake, instead of splitting the range
// evenly up front as at::parallel_for does.
//
// Why: under libgomp PASSIVE (vtrun's default on more than one thread) waking the sleeping
// OpenMP worker costs 30-50 us on a VM's vCPUs, and at::parallel_for's caller then waits for
// the worker's half: a 131k-value boundary took 96 us on two threads against 81 us on one
// (EXPERIMENTS.md E6). Here the caller claims chunks from a shared counter while a helper
// wakes; a helper that wakes after the last chunk is claimed finds nothing to do, and the
// caller waits only for chunks a helper has claimed. The helpers run while the OpenMP worker
// sleeps (between LibTorch's parallel regions), on the CPUs LibTorch's threads use.
//
// Which thread runs which chunk varies from call to call: `body` must give the same result
// whichever thread runs a chunk and in whatever order (its chunks write disjoint outputs and
// combine their tallies commutatively). It must not call LibTorch's parallel functions or
// ops (a helper is not an OpenMP thread: at::parallel_for there would start a new team).
#pragma once

#include <c10/util/C++17.h>  // FunctionRef.h needs it first (LibTorch 1.13)
#include <c10/util/FunctionRef.h>

#include <cstdint>

namespace vt {

// Calls body(first, last) over [0, count) in chunks of `chunk` elements (the last may be
// shorter), on the calling thread and on up to Threads() - 1 helper threads. Returns once
// every chunk is done. An exception from a chunk stops the unclaimed ones and is rethrown
// here (the first one thrown). Runs every chunk on the calling thread, in order, when there is
// one chunk, one thread, or when called inside a parallel region or from a helper.
void HelpedFor(int64_t count, int64_t chunk, c10::function_ref<void(int64_t, int64_t)> body);

// How many chunks helper threads have run since the process started (tests: the helpers do
// take part).
int64_t HelpedChunks();

}  // namespace vt
