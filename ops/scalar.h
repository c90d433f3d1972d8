// The scalar cores in ops/*.h are MPB_HD functions: compiled by both the CPU
// backend and nvcc, so the CPU tests prove the math the GPU runs.
#pragma once

#include "core/hd.h"
#include "core/isa_namespace.h"
