// SPDX-License-Identifier: GPL-2.0
/*
 * The VM harness's canary (tests/vm/selftest-canary.sh): loading it raises
 * one kernel warning, which the harness must turn into a failed run even
 * when the guest script erases the kernel log (dmesg -c) right after.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init wb_canary_init(void)
{
	WARN(1, "wbkit canary: this warning must fail the VM run\n");
	return 0;
}

static void __exit wb_canary_exit(void)
{
}

module_init(wb_canary_init);
module_exit(wb_canary_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("wbkit VM harness canary: raises a kernel warning when loaded");
