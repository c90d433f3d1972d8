/* A stand-in for libnvidia-ml.so.1 with NVML's ABI for the functions
 * runner/machine/gpu_telemetry.cpp loads, for tests on machines without a GPU
 * (MPB_NVML_LIBRARY points the runner here). Sample n reads: SM clock
 * 1980 - n MHz, memory clock 2619, temperature 60 + n % 5, power 500 W of a
 * 700 W limit, 1 GB + n MB used; every odd sample says "SW power cap". Only
 * the bus id 00000000:3B:00.0 exists. Fixed facts: an H100 SXM-like card
 * (runner/machine/gpu_environment.cpp) with ECC on, MIG off, 4 of 18 NVLinks active.
 * Clock locking works (the SM clock then reads the locked value; "base" is
 * 1590 MHz) unless FAKE_NVML_DENY_LOCK is set (NVML_ERROR_NO_PERMISSION);
 * fake_nvml_locked_mhz() tells tests what is locked now (0: nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long total, free, used; } Memory;
static int device = 42;
static unsigned n = 0; /* advanced by each power reading: one per sample */
static unsigned locked = 0; /* the locked SM clock, 0: not locked */

unsigned fake_nvml_locked_mhz(void) { return locked; }

int nvmlInit_v2(void) { n = 0; locked = 0; return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { *d = i == 0 ? &device : 0; return i == 0 ? 0 : 6; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** d) {
  if (strcmp(bus, "00000000:3B:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *d = &device;
  return 0;
}
int nvmlDeviceGetClockInfo(void* d, int type, unsigned* mhz) {
  (void)d;
  *mhz = type == 1 ? (locked ? locked : 1980 - n) : 2619;
  return 0;
}
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned* c) { (void)d; (void)sensor; *c = 60 + n % 5; return 0; }
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) { (void)d; *mw = 500000; ++n; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw) { (void)d; *mw = 700000; return 0; }
/* The total-energy counter: 123456 mJ at the first read, then 2.5 J more per read. */
static unsigned long long energy_reads = 0;
int nvmlDeviceGetTotalEnergyConsumption(void* d, unsigned long long* mj) {
  (void)d;
  *mj = 123456ull + 2500ull * energy_reads++;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  (void)d;
  m->total = 80ull << 30;
  m->used = 1000000000ull + 1000000ull * n;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* r) { (void)d; *r = (n % 2) ? 0x4 : 0; return 0; }
int nvmlDeviceGetUUID(void* d, char* buf, unsigned len) {
  (void)d;
  snprintf(buf, len, "GPU-12345678-abcd-ef01-2345-6789abcdef01");
  return 0;
}
int nvmlDeviceGetVbiosVersion(void* d, char* buf, unsigned len) { (void)d; snprintf(buf, len, "96.00.99.00.01"); return 0; }
int nvmlDeviceGetEccMode(void* d, int* current, int* pending) { (void)d; *current = 1; *pending = 1; return 0; }
int nvmlDeviceGetMigMode(void* d, unsigned* current, unsigned* pending) { (void)d; *current = 0; *pending = 0; return 0; }
int nvmlDeviceGetPersistenceMode(void* d, int* mode) { (void)d; *mode = 1; return 0; }
int nvmlDeviceGetApplicationsClock(void* d, int type, unsigned* mhz) { (void)d; *mhz = type == 1 ? 1755 : 2619; return 0; }
int nvmlDeviceGetMaxClockInfo(void* d, int type, unsigned* mhz) { (void)d; *mhz = type == 1 ? 1980 : 2619; return 0; }
int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* v) { (void)d; *v = 5; return 0; }
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* v) { (void)d; *v = 16; return 0; }
int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* v) { (void)d; *v = 5; return 0; }
/* No nvmlDeviceGetMaxPcieLinkWidth: a missing entry point reads as null. */
int nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
  (void)d;
  if (link >= 18) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *active = link < 4;
  return 0;
}
int nvmlDeviceSetGpuLockedClocks(void* d, unsigned lo, unsigned hi) {
  (void)d;
  if (getenv("FAKE_NVML_DENY_LOCK")) return 4; /* NVML_ERROR_NO_PERMISSION */
  if (lo != hi) return 2;
  locked = lo == 0xffffff01u ? 1590 : lo;
  return 0;
}
int nvmlDeviceResetGpuLockedClocks(void* d) { (void)d; locked = 0; return 0; }
