// What the host stand-in for the CUDA driver (fake_cuda_host.cpp) offers the
// stand-ins of other libraries (fake_nccl_host.cpp): work queued on a stream.
#pragma once

#include <cuda.h>

#include <cstdint>

extern "C" {
/// Queues `fn(arg)` on stream `s`: it runs on the stream's worker thread
/// after the work queued before it; until it returned, the stream (and any
/// event recorded after it) is not ready. \returns 0, or 1 for a null stream.
int pccFakeStreamEnqueue(CUstream s, void (*fn)(void*), void* arg);
/// float16 <-> float, rounding to nearest even (the stand-ins' one copy).
float pccFakeHalfToFloat(uint16_t h);
uint16_t pccFakeFloatToHalf(float f);
}
