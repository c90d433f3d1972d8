// Which class of the CPU device defines each group of core/device_ops.inc:
// CpuDevice itself (memory, the oneDNN GEMM, the step's host-side state, the
// FP8 scale update: no ISA build) or each ISA's Kernels (backends/cpu/kernels/,
// the hand-written loops, compiled once per ISA), which derives from CpuDevice
// and is the device make_cpu_device() returns: the kernel table IS the device,
// no second virtual call.
//
// MPB_CPU_OWNER_<group>(declaration for CpuDevice, declaration for Kernels)
// keeps the one its owner needs. A group missing here fails to compile
// (MPB_CPU_OWNER_<group> is then an undeclared function), so a new group has
// to be given an owner.
#pragma once

#define MPB_CPU_IN_DEVICE(in_device, in_kernels) in_device
#define MPB_CPU_IN_KERNELS(in_device, in_kernels) in_kernels

#define MPB_CPU_OWNER_memory MPB_CPU_IN_DEVICE
#define MPB_CPU_OWNER_gemm MPB_CPU_IN_DEVICE
#define MPB_CPU_OWNER_step_state MPB_CPU_IN_DEVICE
#define MPB_CPU_OWNER_fp8_scaling MPB_CPU_IN_DEVICE
#define MPB_CPU_OWNER_elementwise MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_loss MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_reduce MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_transformer MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_attention MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_embedding MPB_CPU_IN_KERNELS
#define MPB_CPU_OWNER_optimizer MPB_CPU_IN_KERNELS
