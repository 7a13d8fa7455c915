/* A stand-in for libcuda.so.1 with only the entry points the cuda backend's
 * probe resolves first, for the tests of the driver loader on machines
 * without a GPU. cuInit returns $PCC_FAKE_CUDA_INIT (default 0); the device
 * count is $PCC_FAKE_CUDA_DEVICES (default 0). Anything else is missing, so a
 * probe that gets past the device count fails naming the next entry point. */
#include <stdlib.h>
#include <string.h>

static int envInt(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : 0;
}

int cuInit(unsigned int flags) {
  (void)flags;
  return envInt("PCC_FAKE_CUDA_INIT");
}
int cuDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}
int cuDeviceGetCount(int* n) {
  *n = envInt("PCC_FAKE_CUDA_DEVICES");
  return 0;
}
int cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return 0;
}
int cuDeviceGetName(char* name, int len, int dev) {
  (void)dev;
  strncpy(name, "Fake GPU", (size_t)len);
  return 0;
}
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)attr;
  (void)dev;
  *v = 9;
  return 0;
}
int cuGetErrorName(int r, const char** s) {
  *s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : r == 35 ? "CUDA_ERROR_INSUFFICIENT_DRIVER" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuGetErrorString(int r, const char** s) {
  *s = r == 100 ? "no CUDA-capable device is detected" : "fake error";
  return 0;
}
