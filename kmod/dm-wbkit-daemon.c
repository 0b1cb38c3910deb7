// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-daemon.c - background work: the writeback daemon, which decides
 * when to write flushed segments back to the backing device and runs one
 * batch at a time (dm-wbkit-writeback.c, or a move forward,
 * dm-wbkit-forward.c), and the periodic daemon: the superblock record and
 * the periodic data sync.
 */
#include <linux/jiffies.h>
#include <linux/part_stat.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* When to write back */

/*
 * Whether the daemon has work: flushed segments not yet written back, and
 * a reason to write them now: an urgent one (wb_writeback_urgent), small
 * ones to move forward (wb_forward_wanted) or, as
 * in dm-writeboost, a backing device busy less than writeback_threshold
 * percent of the last second (wb_update_writeback_allowed; 0 = never in
 * the background).
 */
bool wb_should_writeback(struct wb_device *wb)
{
	u64 lf = READ_ONCE(wb->last_flushed_id);
	u64 lw = READ_ONCE(wb->last_writeback_id);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]);

	if (wb_dead(wb) || lw >= lf)
		return false;
	return wb_writeback_urgent(wb) || wb_forward_wanted(wb) ||
	       (thr && READ_ONCE(wb->writeback_allowed));
}

/*
 * dm-writeboost's writeback modulator, once a second: background writeback
 * is allowed while the backing device was busy (io_ticks) less than
 * writeback_threshold percent of the last interval. Its own writeback
 * counts too, so with a threshold below 100 it throttles itself, as
 * upstream does; 100 lets it run whenever the device is not saturated.
 */
void wb_update_writeback_allowed(struct wb_device *wb, unsigned long *ticks,
				 unsigned long *at)
{
	unsigned long now = jiffies;
	unsigned long t = part_stat_read(wb->backing_dev->bdev, io_ticks);
	unsigned int ms = jiffies_to_msecs(now - *at);
	unsigned int busy = jiffies_to_msecs(t - *ticks);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]);
	bool allowed = thr && (!ms || (u64)busy * 100 < (u64)thr * ms);

	*ticks = t;
	*at = now;
	WRITE_ONCE(wb->writeback_allowed, allowed);
	if (allowed)
		wake_up(&wb->writeback_wait);
}

/* ---------------------------------------------------------------------- */
/* The writeback daemon, one batch at a time */

/* The daemon's own reason to give up waiting: it is being stopped. */
static bool wb_writeback_stopping(struct wb_device *wb)
{
	return kthread_should_stop() ||
	       test_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
}

/*
 * batch_lock is held for a whole batch, seconds on a slow backing device,
 * so it is taken in a slice-woken wait (see wb_wait_io) and its release
 * wakes wb->wait. The daemon's wait also ends when it is being stopped:
 * false, not locked.
 */
bool wb_lock_batch(struct wb_device *wb, bool daemon)
{
	bool locked = false;

	wb_wait_io(wb->wait, (daemon && wb_writeback_stopping(wb)) ||
		   (locked = mutex_trylock(&wb->batch_lock)));
	return locked;
}

void wb_unlock_batch(struct wb_device *wb)
{
	mutex_unlock(&wb->batch_lock);
	wake_up_all(&wb->wait);
}

/*
 * One batch at a time: the daemon, and drop_caches on a suspended device
 * (which writes back in its caller while the daemon is stopped, and may
 * overlap a resume that starts it again).
 */
void wb_writeback_batch(struct wb_device *wb)
{
	wb_lock_batch(wb, false);
	wb_writeback_batch_locked(wb);
	wb_unlock_batch(wb);
}

int wb_writeback_daemon(void *data)
{
	struct wb_device *wb = data;

	while (!kthread_should_stop()) {
		wait_event_interruptible_timeout(wb->writeback_wait,
						 (wb_should_writeback(wb) &&
						  !wb_writeback_stopping(wb)) ||
						 kthread_should_stop(), HZ);
		if (wb_writeback_stopping(wb) || !wb_should_writeback(wb) ||
		    !wb_lock_batch(wb, true))
			continue;
		if (!wb_forward_heads(wb))
			wb_writeback_batch_locked(wb);
		wb_unlock_batch(wb);
	}
	return 0;
}

/*
 * kthread_stop's wait does not wake for the hung-task detector, and
 * dmsetup remove would sit in it for the whole batch in progress (6 s on
 * a backing device taking 3 s per write, then as long for its flush). So
 * the daemon is told to start no other batch, the one in progress ends in
 * wb_lock_batch's slice-woken wait, and only then is the thread stopped.
 * The thread must not return before kthread_stop: it waits for it.
 */
void wb_stop_writeback_daemon(struct wb_device *wb)
{
	set_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
	wb_lock_batch(wb, false);
	kthread_stop(wb->writeback_task);
	wb_unlock_batch(wb);
	clear_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
	wb->writeback_task = NULL;
}

/* ---------------------------------------------------------------------- */
/* Superblock record and data sync */

/*
 * last_writeback_id only moves after the backing device was flushed, so the
 * record never runs ahead of it.
 */
static void wb_update_sb_record(struct wb_device *wb, void *blk)
{
	wb_write_sb_record(wb, blk, READ_ONCE(wb->last_writeback_id));
}

int wb_periodic_daemon(void *data)
{
	struct wb_device *wb = data;
	unsigned long last_sync = jiffies, last_record = jiffies;
	unsigned long ticks = part_stat_read(wb->backing_dev->bdev, io_ticks);
	unsigned long ticks_at = jiffies;
	void *blk = (void *)__get_free_page(GFP_KERNEL);

	while (!kthread_should_stop()) {
		unsigned int sync, rec;

		schedule_timeout_interruptible(HZ);
		/* postsuspend stops this thread; this covers the moment before. */
		if (wb_dead(wb) || test_bit(WB_F_SUSPENDED, &wb->flags))
			continue;
		/* Held by wb_stop_periodic_daemon: no round until kthread_stop. */
		if (!mutex_trylock(&wb->periodic_lock))
			continue;

		wb_update_writeback_allowed(wb, &ticks, &ticks_at);

		sync = READ_ONCE(wb->tunable[WB_T_SYNC_DATA_INTERVAL]);
		if (!sync) {
			last_sync = jiffies;
		} else if (time_after_eq(jiffies, last_sync + sync * HZ)) {
			last_sync = jiffies;
			/* Written and made durable by the flusher. */
			wb_commit(wb);
		}

		rec = READ_ONCE(wb->tunable[WB_T_UPDATE_SB_RECORD_INTERVAL]);
		if (!rec) {
			last_record = jiffies;
		} else if (blk && time_after_eq(jiffies, last_record + rec * HZ)) {
			last_record = jiffies;
			wb_update_sb_record(wb, blk);
		}
		mutex_unlock(&wb->periodic_lock);
		wake_up_all(&wb->wait);
	}
	free_page((unsigned long)blk);
	return 0;
}

/*
 * As wb_stop_writeback_daemon, for the same reason: a round writes the
 * superblock record, as long as a slow cache device takes, and
 * kthread_stop would sleep through it in one piece. The round in progress
 * ends in a slice-woken wait, and only then is the thread stopped (it is
 * between rounds, and starts none while the lock is held here).
 */
void wb_stop_periodic_daemon(struct wb_device *wb)
{
	wb_wait_io(wb->wait, mutex_trylock(&wb->periodic_lock));
	kthread_stop(wb->periodic_task);
	mutex_unlock(&wb->periodic_lock);
	wb->periodic_task = NULL;
}
