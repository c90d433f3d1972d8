/* A stand-in for libnvidia-ml.so.1 with NVML's ABI for the functions
 * runner/gpu_telemetry.cpp loads, for tests on machines without a GPU
 * (MPB_NVML_LIBRARY points the runner here). Sample n reads: SM clock
 * 1980 - n MHz, memory clock 2619, temperature 60 + n % 5, power 500 W of a
 * 700 W limit, 1 GB + n MB used; every odd sample says "SW power cap". Only
 * the bus id 00000000:3B:00.0 exists. */
#include <string.h>

typedef struct { unsigned long long total, free, used; } Memory;
static int device = 42;
static unsigned n = 0; /* advanced by each power reading: one per sample */

int nvmlInit_v2(void) { n = 0; return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { *d = i == 0 ? &device : 0; return i == 0 ? 0 : 6; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** d) {
  if (strcmp(bus, "00000000:3B:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *d = &device;
  return 0;
}
int nvmlDeviceGetClockInfo(void* d, int type, unsigned* mhz) {
  (void)d;
  *mhz = type == 1 ? 1980 - n : 2619;
  return 0;
}
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned* c) { (void)d; (void)sensor; *c = 60 + n % 5; return 0; }
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) { (void)d; *mw = 500000; ++n; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw) { (void)d; *mw = 700000; return 0; }
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  (void)d;
  m->total = 80ull << 30;
  m->used = 1000000000ull + 1000000ull * n;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* r) { (void)d; *r = (n % 2) ? 0x4 : 0; return 0; }
