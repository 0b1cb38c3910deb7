// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-core.c - the bottom layer: the segment checksum, the dead
 * state and error counts, and the report of a wait on the devices that
 * lasts too long (wb_wait_slow). It calls no other file of the module.
 */
#include <linux/crc32c.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/*
 * CRC-32C (Castagnoli) of bytes [512, 4096 * (length + 1)) of a segment:
 * the metablock area and the data blocks. Stored little-endian.
 */
u32 wb_checksum(const void *seg_buf, u8 length)
{
	return wb_checksum_parts(seg_buf, seg_buf + WB_BLOCK_SIZE, length);
}

/* The same, with the header block and the data blocks apart in memory. */
u32 wb_checksum_parts(const void *header_block, const void *data, u8 length)
{
	u32 crc = crc32c(0xffffffff, header_block + WB_SEGMENT_HEADER_SIZE,
			 WB_BLOCK_SIZE - WB_SEGMENT_HEADER_SIZE);

	return ~crc32c(crc, data, (size_t)length * WB_BLOCK_SIZE);
}

/*
 * Whether a segment read into seg_buf (header and length data blocks)
 * matches its stored checksum, either reading of docs/FORMAT.md: as
 * written, or with the metablocks past length read as zero (an append in
 * place cut between its two writes). The second reading zeroes that tail
 * in seg_buf, which nobody reads past length.
 */
bool wb_checksum_matches(void *seg_buf, u8 length)
{
	struct wb_segment_header_device *hdr = seg_buf;
	u32 stored = le32_to_cpu(hdr->checksum);

	if (wb_checksum(seg_buf, length) == stored)
		return true;
	if (wb_metablock_tail_is_zero(seg_buf, length))
		return false;
	wb_zero_metablock_tail(seg_buf, length);
	return wb_checksum(seg_buf, length) == stored;
}

/* ---------------------------------------------------------------------- */
/* The dead state (fail-stop, like dm-writecache) */

static const char *wb_dev_name(enum wb_dev_kind dev)
{
	return dev == WB_DEV_CACHE ? "cache" : "backing";
}

const char *wb_op_name(enum wb_op op)
{
	return op == WB_OP_READ ? "read" : op == WB_OP_WRITE ? "write" : "flush";
}

/* Every error of either device counts, fatal or not (message error_counts). */
void wb_count_error(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op)
{
	atomic64_inc(&wb->nr_errors[(dev == WB_DEV_CACHE ? WB_ERR_CACHE_READ :
				     WB_ERR_BACKING_READ) + op]);
}

/*
 * A bio from above failed on the backing device, and the target goes on
 * (the fault table's rows that touch nothing the cache holds). Callable
 * from bio completion.
 */
void wb_fail_request(struct wb_device *wb, enum wb_op op, u64 sector, int err)
{
	wb_count_error(wb, WB_DEV_BACKING, op);
	atomic64_inc(&wb->nr_errors[WB_ERR_FAILED_REQUESTS]);
	DMERR_LIMIT("backing device %s error %d at sector %llu: this request fails, the target goes on",
		    wb_op_name(op), err, (unsigned long long)sector);
}

/*
 * Records the first fatal error and kills the target. Callable from any
 * context, including bio completion. The first caller wins the cmpxchg and
 * is the only one that logs; the state never clears. kmod/README.md's
 * fault table lists the callers: errors that put data the cache holds at
 * risk.
 */
void wb_set_dead(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op,
		 u64 sector, int err)
{
	if (!err)
		err = -EIO;
	wb_count_error(wb, dev, op);
	if (cmpxchg(&wb->dead_err, 0, err) != 0)
		return;

	wb->cause.err = err;
	wb->cause.dev = dev;
	wb->cause.op = op;
	wb->cause.sector = sector;
	smp_mb__before_atomic();	/* the cause is visible before the flag */
	set_bit(WB_F_DEAD, &wb->flags);

	if (err != -EIO)
		DMWARN("unexpected error %d from the %s device, treated as fatal",
		       err, wb_dev_name(dev));
	DMERR("%s device %s error %d at sector %llu: target is dead, all I/O now fails",
	      wb_dev_name(dev), wb_op_name(op), err, (unsigned long long)sector);

	wake_up_all(&wb->wait);
	wake_up_all(&wb->writeback_wait);
	wake_up_all(&wb->copy_wait);
	/* The flusher fails the flush/FUA bios that wait for a commit. */
	if (wb->flush_wq)
		queue_work(wb->flush_wq, &wb->flush_work);
}

/* ---------------------------------------------------------------------- */
/* Waits on the devices that last too long */

/*
 * Waits on the devices wake every WB_WAIT_SLICE, so the hung-task detector
 * never reports them (wb_wait_io); this reports one that lasts as long as
 * the detector's default timeout (its sysctl is not exported), once per
 * wait. 0 reports none.
 */
#ifndef CONFIG_DEFAULT_HUNG_TASK_TIMEOUT
#define CONFIG_DEFAULT_HUNG_TASK_TIMEOUT 120
#endif
static unsigned int slow_wait_secs = CONFIG_DEFAULT_HUNG_TASK_TIMEOUT;
module_param(slow_wait_secs, uint, 0644);
MODULE_PARM_DESC(slow_wait_secs,
		 "report a wait for the devices that lasts this long, with its stack (0: never)");

void wb_wait_slow(struct wb_wait_clock *clock, const char *func, int line)
{
	unsigned int secs = READ_ONCE(slow_wait_secs);

	if (clock->reported || !secs ||
	    time_before(jiffies, clock->start + (unsigned long)secs * HZ))
		return;
	clock->reported = true;
	pr_warn("dm-wbkit: task %s:%d has waited more than %u s in %s (line %d) for I/O or another thread; its stack:\n",
		current->comm, task_pid_nr(current), secs, func, line);
	dump_stack();
}
