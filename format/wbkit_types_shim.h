/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Userspace stand-ins for the kernel spellings wbkit_format.h uses, so the
 * one format header compiles in C and C++ outside the kernel too.
 */
#ifndef WBKIT_TYPES_SHIM_H
#define WBKIT_TYPES_SHIM_H

#include <linux/types.h>	/* __le32, __le64, __u8, __u32, __u64 */
#include <stddef.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifndef __packed
#define __packed __attribute__((packed))
#endif

#ifdef __cplusplus
#define WB_FORMAT_CHECK(cond, msg) static_assert(cond, msg)
#else
#define WB_FORMAT_CHECK(cond, msg) _Static_assert(cond, msg)
#endif

#endif /* WBKIT_TYPES_SHIM_H */
