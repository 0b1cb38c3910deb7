// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-target.c - the "writeboost" device-mapper target: constructor
 * and destructor, suspend and resume, the module. Tunables, messages and
 * status are dm-wbkit-message.c, the bio path dm-wbkit-io.c, the read cache
 * dm-wbkit-rcache.c, the on-disk log dm-wbkit-flush.c (written),
 * dm-wbkit-format.c and dm-wbkit-replay.c (formatted, replayed), background
 * work dm-wbkit-daemon.c; kmod/README.md ("Layout") lists every file.
 *
 * A write-back cache in the dm-writeboost style: writes are logged into RAM
 * buffer segments, written to the cache device as whole segments, and later
 * written back to the backing device. The on-disk format is dm-writeboost
 * 2.2's (docs/FORMAT.md), so either target can take over the other's cache.
 * This module registers the same target name as dm-writeboost: the two
 * modules cannot be loaded at the same time.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/bio.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/log2.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Constructor and destructor */

/* Stops both kthreads; a round or batch in progress finishes first. */
static void wb_stop_daemons(struct wb_device *wb)
{
	if (wb->periodic_task)
		wb_stop_periodic_daemon(wb);
	if (wb->writeback_task)
		wb_stop_writeback_daemon(wb);
}

struct wb_queue_mark {
	struct work_struct work;
	struct completion done;
};

static void wb_queue_mark_reached(struct work_struct *work)
{
	complete(&container_of(work, struct wb_queue_mark, work)->done);
}

/*
 * Waits for every work item queued so far on an ordered workqueue, the one
 * running included. flush_work would sleep in one piece for as long as the
 * work waits for the devices: the hung-task detector would report a slow
 * device as a hang, and a wait that never ends would not report itself
 * (see wb_wait_io). A mark queued behind the work is waited for in slices
 * instead; the queue being ordered, it runs after everything before it.
 */
static void wb_drain_ordered_queue(struct workqueue_struct *wq)
{
	struct wb_queue_mark mark;
	struct wb_wait_clock clock = { jiffies, false };

	INIT_WORK_ONSTACK(&mark.work, wb_queue_mark_reached);
	init_completion(&mark.done);
	queue_work(wq, &mark.work);
	while (!wait_for_completion_timeout(&mark.done, WB_WAIT_SLICE))
		wb_wait_slow(&clock, __func__, __LINE__);
	destroy_work_on_stack(&mark.work);
}

/*
 * Every instance, with the mapped device whose table holds it. dm opens a
 * device for every table that names it, so two mapped devices can each
 * have a table over the same cache device (or backing device): each would
 * replay the log, then write its own over the other's, and write back to
 * a backing device that the other changes under it. A device that an
 * instance of another mapped device uses, in either role, is refused.
 * Instances of one mapped device share their devices: a reloaded table is
 * constructed while the old one is live, and dm suspends the old one
 * before the new one resumes.
 */
static LIST_HEAD(wb_instances);
static DEFINE_MUTEX(wb_instances_lock);

static bool wb_shares_a_device(struct wb_device *a, struct wb_device *b)
{
	return a->cache_dev->bdev == b->cache_dev->bdev ||
	       a->cache_dev->bdev == b->backing_dev->bdev ||
	       a->backing_dev->bdev == b->cache_dev->bdev ||
	       a->backing_dev->bdev == b->backing_dev->bdev;
}

/* The name dmsetup knows the device by, or its number when it has none. */
static const char *wb_md_name(struct mapped_device *md, char name[DM_NAME_LEN])
{
	return dm_copy_name_and_uuid(md, name, NULL) ? dm_device_name(md) : name;
}

static int wb_claim_devices(struct wb_device *wb, char **error)
{
	char name[DM_NAME_LEN], other_name[DM_NAME_LEN];
	struct wb_device *other;
	int r = 0;

	mutex_lock(&wb_instances_lock);
	list_for_each_entry(other, &wb_instances, instance_node) {
		if (other->md == wb->md || !wb_shares_a_device(wb, other))
			continue;
		DMERR("%s: a device of this table is the cache or backing device of %s",
		      wb_md_name(wb->md, name), wb_md_name(other->md, other_name));
		*error = "A device of this table is in use by another dm-wbkit device";
		r = -EBUSY;
		break;
	}
	if (!r)
		list_add_tail(&wb->instance_node, &wb_instances);
	mutex_unlock(&wb_instances_lock);
	return r;
}

static void wb_release_devices(struct wb_device *wb)
{
	mutex_lock(&wb_instances_lock);
	list_del_init(&wb->instance_node);
	mutex_unlock(&wb_instances_lock);
}

static int wb_start_daemons(struct wb_device *wb)
{
	struct task_struct *t;

	t = kthread_run(wb_writeback_daemon, wb, "wbkit_writeback");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wb->writeback_task = t;
	t = kthread_run(wb_periodic_daemon, wb, "wbkit_periodic");
	if (IS_ERR(t)) {
		wb_stop_daemons(wb);
		return PTR_ERR(t);
	}
	wb->periodic_task = t;
	return 0;
}

/*
 * Never writes to a device: an instance that went live was suspended
 * (postsuspend wrote its RAM buffer out), and one that never did has
 * nothing to write.
 */
static void wb_destroy(struct wb_device *wb)
{
	struct dm_target *ti = wb->ti;
	unsigned int i;

	wb_stop_daemons(wb);
	wb_release_devices(wb);
	if (wb->io_wq)
		destroy_workqueue(wb->io_wq);
	if (wb->fallback_wq)
		destroy_workqueue(wb->fallback_wq);
	if (wb->flush_wq) {
		destroy_workqueue(wb->flush_wq);	/* postsuspend drained it */
		wb->flush_wq = NULL;	/* wb_set_dead must not queue work on it */
	}

	kvfree(wb->writeback_entries);
	vfree(wb->rc_data);
	kvfree(wb->rc_hash);
	kvfree(wb->rc_sorted);
	kvfree(wb->rc_cells);
	for (i = 0; i < WB_NR_BUFS; i++)
		vfree(wb->rambuf[i]);
	vfree(wb->stream);
	free_page((unsigned long)wb->bounce);
	free_page((unsigned long)wb->bounce2);
	free_page((unsigned long)wb->fallback_bounce);
	free_page((unsigned long)wb->zero_block);
	free_page((unsigned long)wb->commit_header);
	vfree(wb->htable);
	vfree(wb->mbs);
	vfree(wb->segs);
	bioset_exit(&wb->bio_set);
	if (wb->cache_dev)
		dm_put_device(ti, wb->cache_dev);
	if (wb->backing_dev)
		dm_put_device(ti, wb->backing_dev);
	kfree(wb);
}

/* The memory kmod/README.md states (WB_MEM_*, wbkit_contract.h). */
static_assert(sizeof(struct wb_metablock) == WB_MEM_ENTRY_BYTES);
static_assert(sizeof(*((struct wb_device *)NULL)->htable) == WB_MEM_BUCKET_BYTES);
static_assert(sizeof(struct wb_segment) <= WB_MEM_SEGMENT_BYTES);
static_assert(WB_NR_BUFS * WB_RAMBUF_SIZE + WB_SCRATCH_SIZE +
	      WB_MAX_BATCH * WB_BLOCKS_PER_SEGMENT *
	      sizeof(struct wb_writeback_entry) +
	      WB_TUNABLE_MAX_NR_READ_CACHE_CELLS * (sizeof(struct wb_rc_cell) +
					    sizeof(struct wb_rc_key) +
					    sizeof(struct hlist_head)) +
	      5 * PAGE_SIZE + sizeof(struct wb_device) <= WB_MEM_FIXED_BYTES,
	      "the fixed part of the device's memory");

static int wb_alloc_metadata(struct wb_device *wb)
{
	unsigned long nr_blocks = wb->nr_segments * WB_BLOCKS_PER_SEGMENT;
	unsigned int i;
	u64 k;

	/*
	 * vzalloc, not kvcalloc: kvmalloc refuses more than INT_MAX bytes,
	 * which the metablock array of a cache over ~700 GiB needs.
	 * array_size saturates on overflow, which vzalloc then refuses.
	 * Three hash buckets per four blocks: chains average at most 1.33
	 * entries, and the table costs 3 bytes per cache block.
	 */
	wb->segs = vzalloc(array_size(wb->nr_segments, sizeof(*wb->segs)));
	wb->mbs = vzalloc(array_size(nr_blocks, sizeof(*wb->mbs)));
	wb->ht_buckets = max_t(u32, 1, nr_blocks / WB_MEM_BUCKETS_DEN *
				      WB_MEM_BUCKETS_NUM);
	wb->htable = vzalloc(array_size(wb->ht_buckets, sizeof(*wb->htable)));
	if (!wb->segs || !wb->mbs || !wb->htable)
		return -ENOMEM;
	for (k = 0; k < wb->nr_segments; k++) {
		wb->segs[k].slot = (u32)k;
		wb->segs[k].mb = &wb->mbs[k * WB_BLOCKS_PER_SEGMENT];
		INIT_LIST_HEAD(&wb->segs[k].flush_node);
		INIT_LIST_HEAD(&wb->segs[k].retain_node);
	}
	for (i = 0; i < WB_NR_BUFS; i++) {
		wb->rambuf[i] = vzalloc(WB_RAMBUF_SIZE);
		if (!wb->rambuf[i])
			return -ENOMEM;
		wb->free_rambuf[wb->nr_free_rambuf++] = wb->rambuf[i];
	}
	wb->stream = vmalloc(WB_SCRATCH_SIZE);
	if (!wb->stream)
		return -ENOMEM;
	wb->rc_nr = wb->tunable[WB_T_NR_READ_CACHE_CELLS];
	wb->rc_nr_free = wb->rc_nr;
	atomic_set(&wb->rc_pending, wb->rc_nr);
	wb->rc_last_sector = ~(sector_t)0;
	/* hash_64() needs 1..64 bits: one cell (a legal table line) has 0. */
	wb->rc_hash_bits = max_t(unsigned int, 1,
				 ilog2(roundup_pow_of_two(wb->rc_nr)));
	wb->rc_cells = kvcalloc(wb->rc_nr, sizeof(*wb->rc_cells), GFP_KERNEL);
	wb->rc_sorted = kvcalloc(wb->rc_nr, sizeof(*wb->rc_sorted), GFP_KERNEL);
	wb->rc_hash = kvcalloc(1U << wb->rc_hash_bits, sizeof(*wb->rc_hash),
			       GFP_KERNEL);
	if (!wb->rc_cells || !wb->rc_sorted || !wb->rc_hash)
		return -ENOMEM;
	if (wb->tunable[WB_T_READ_CACHE_THRESHOLD] && wb_rc_alloc_data(wb))
		return -ENOMEM;
	wb->writeback_entries = kvcalloc(WB_MAX_BATCH * WB_BLOCKS_PER_SEGMENT,
					 sizeof(*wb->writeback_entries),
					 GFP_KERNEL);
	wb->bounce = (void *)__get_free_page(GFP_KERNEL);
	wb->bounce2 = (void *)__get_free_page(GFP_KERNEL);
	wb->fallback_bounce = (void *)__get_free_page(GFP_KERNEL);
	wb->zero_block = (void *)get_zeroed_page(GFP_KERNEL);
	wb->commit_header = (void *)__get_free_page(GFP_KERNEL);
	if (!wb->writeback_entries || !wb->bounce || !wb->bounce2 ||
	    !wb->fallback_bounce || !wb->zero_block || !wb->commit_header)
		return -ENOMEM;
	return 0;
}

/*
 * Construct a writeboost target:
 *
 *   <start> <len> writeboost <backing_dev> <cache_dev>
 *       [<#optargs> <key> <value> ...]
 *
 * keys: writeback_threshold (0..100, default 0),
 *       nr_max_batched_writeback (1..32, default 32),
 *       update_sb_record_interval (seconds, 0..3600, default 0),
 *       sync_data_interval (seconds, 0..3600, default 0),
 *       read_cache_threshold (0..127, default 0: no read caching),
 *       write_around_mode (0 or 1, default 0),
 *       nr_read_cache_cells (1..2048, default 2048).
 *
 * The constructor writes nothing and starts nothing: a reload builds its
 * instance while the old one is live. It refuses read-only tables and a
 * cache device that holds neither the magic "WBst" nor a zeroed sector 0.
 * The first preresume formats (zeroed sector 0) or replays.
 */
static int writeboost_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct wb_device *wb;
	int t, r;

	bool blank;

	if (argc < 2) {
		ti->error = "Usage: <backing_dev> <cache_dev> [<#optargs> <key> <value> ...]";
		return -EINVAL;
	}
	/* Replay and writeback write both devices, even with no writes above. */
	if (!(dm_table_get_mode(ti->table) & WB_TABLE_MODE_WRITE)) {
		ti->error = "Read-only tables are not supported: replay and writeback write";
		return -EROFS;
	}

	wb = kzalloc(sizeof(*wb), GFP_KERNEL);
	if (!wb) {
		ti->error = "Cannot allocate the target context";
		return -ENOMEM;
	}
	ti->private = wb;
	wb->ti = ti;
	spin_lock_init(&wb->lock);
	init_waitqueue_head(&wb->wait);
	init_waitqueue_head(&wb->copy_wait);
	init_waitqueue_head(&wb->commit_wait);
	bio_list_init(&wb->commit_waiters);
	init_waitqueue_head(&wb->writeback_wait);
	mutex_init(&wb->batch_lock);
	mutex_init(&wb->periodic_lock);
	mutex_init(&wb->discard_lock);
	INIT_LIST_HEAD(&wb->instance_node);
	wb->md = dm_table_get_md(ti->table);
	INIT_LIST_HEAD(&wb->flush_queue);
	INIT_LIST_HEAD(&wb->retained);
	spin_lock_init(&wb->bio_lock);
	bio_list_init(&wb->deferred);
	bio_list_init(&wb->fallback);
	INIT_WORK(&wb->io_work, wb_io_work);
	INIT_WORK(&wb->fallback_work, wb_fallback_work);
	INIT_WORK(&wb->flush_work, wb_flush_work);
	INIT_WORK(&wb->rc_work, wb_rc_work);
	atomic_set(&wb->drop_caches, 0);
	for (t = 0; t < WB_STATLEN; t++)
		atomic64_set(&wb->stat[t], 0);
	atomic64_set(&wb->nr_partial_flushed, 0);
	/* No write yet: nothing moves forward on a cache just replayed. */
	wb->last_write_jiffies = jiffies - HZ;
	atomic64_set(&wb->nr_forwarded_segs, 0);
	atomic64_set(&wb->nr_forwarded_blocks, 0);
	for (t = 0; t < WB_T_NR; t++)
		wb->tunable[t] = wb_tunables[t].def;
	r = bioset_init(&wb->bio_set, BIO_POOL_SIZE,
			offsetof(struct wb_bio, bio), BIOSET_NEED_BVECS);
	if (r) {
		ti->error = "Cannot allocate the bio set";
		kfree(wb);
		ti->private = NULL;
		return r;
	}

	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &wb->backing_dev);
	if (r) {
		ti->error = "Cannot open the backing device";
		goto bad;
	}
	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &wb->cache_dev);
	if (r) {
		ti->error = "Cannot open the cache device";
		goto bad;
	}
	if (wb->cache_dev->bdev == wb->backing_dev->bdev) {
		ti->error = "The backing and the cache device must differ";
		r = -EINVAL;
		goto bad;
	}
	r = wb_claim_devices(wb, &ti->error);
	if (r)
		goto bad;
	r = wb_parse_optargs(wb, &as, &ti->error);
	if (r)
		goto bad;
	wb->write_around = wb->tunable[WB_T_WRITE_AROUND_MODE];

	wb->cache_sectors = bdev_nr_sectors(wb->cache_dev->bdev);
	wb->backing_sectors = bdev_nr_sectors(wb->backing_dev->bdev);
	wb->nr_segments = wb_nr_segments(wb->cache_sectors);
	if (!wb->nr_segments) {
		ti->error = "The cache device is smaller than 1.5 MiB (superblock and one segment)";
		r = -EINVAL;
		goto bad;
	}
	/* Entries link by index + 1 in 32 bits (struct wb_metablock). */
	if (wb->nr_segments * WB_BLOCKS_PER_SEGMENT >= WB_HT_END) {
		ti->error = "The cache device is too large (over 2^32 - 2 blocks, 16 TiB)";
		r = -EINVAL;
		goto bad;
	}
	if (ti->len > WB_MAX_TARGET_SECTORS) {
		ti->error = "The target is too long (more than 2^40 blocks of 4 KiB, 4 PiB)";
		r = -EINVAL;
		goto bad;
	}
	if (ti->len > wb->backing_sectors) {
		ti->error = "The target is longer than the backing device";
		r = -EINVAL;
		goto bad;
	}

	/*
	 * A header block is zeroed from a 4 KiB buffer (wb_header_lbs), and
	 * the log's 4 KiB blocks could not be written whole on such a device.
	 */
	if (bdev_logical_block_size(wb->cache_dev->bdev) > WB_BLOCK_SIZE ||
	    bdev_logical_block_size(wb->backing_dev->bdev) > WB_BLOCK_SIZE) {
		ti->error = "A device has a logical block size above 4096 bytes";
		r = -EINVAL;
		goto bad;
	}

	r = wb_alloc_metadata(wb);
	if (r) {
		ti->error = "Not enough memory for the metadata of this cache device";
		goto bad;
	}

	/* Only reads: a foreign device is refused before anything is written. */
	r = wb_check_cache_signature(wb, &blank, &ti->error);
	if (r)
		goto bad;

	wb->io_wq = alloc_ordered_workqueue("wbkit_io", WQ_MEM_RECLAIM);
	wb->fallback_wq = alloc_ordered_workqueue("wbkit_fallback",
						  WQ_MEM_RECLAIM);
	/* High priority: flush/FUA bios wait for it (group commit). */
	wb->flush_wq = alloc_ordered_workqueue("wbkit_flush",
					       WQ_MEM_RECLAIM | WQ_HIGHPRI);
	if (!wb->io_wq || !wb->fallback_wq || !wb->flush_wq) {
		ti->error = "Cannot create the workqueues";
		r = -ENOMEM;
		goto bad;
	}
	/* Suspended until the first resume: no thread, no I/O. */
	set_bit(WB_F_SUSPENDED, &wb->flags);

	r = dm_set_target_max_io_len(ti, WB_BLOCK_SECTORS);
	if (r) {
		ti->error = "Cannot set the maximum I/O size";
		goto bad;
	}
	ti->num_flush_bios = 1;
	ti->flush_supported = true;
	/*
	 * Discards drop cached copies whatever the backing device supports
	 * (wb_discard); they go on to it when it supports them.
	 */
	ti->num_discard_bios = 1;
	ti->discards_supported = true;
	ti->per_io_data_size = sizeof(struct wb_per_bio);
	return 0;

bad:
	wb_destroy(wb);
	ti->private = NULL;
	return r;
}

static void writeboost_dtr(struct dm_target *ti)
{
	wb_destroy(ti->private);
}

/* ---------------------------------------------------------------------- */
/* Suspend and resume */

/*
 * Everything transient reaches the cache device (RAM buffer, then flush),
 * and both kthreads stop: from here to the next preresume this instance
 * does no I/O, so a copy of either device stays valid and a reloaded table
 * can replay the log undisturbed.
 */
/*
 * A drop_caches message holds the live table, and dm's suspend waits for
 * it (synchronize_srcu) after presuspend: this makes it give up first.
 */
static void writeboost_presuspend(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	set_bit(WB_F_SUSPENDING, &wb->flags);
	wake_up_all(&wb->wait);
}

static void writeboost_presuspend_undo(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	clear_bit(WB_F_SUSPENDING, &wb->flags);
}

static void writeboost_postsuspend(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	set_bit(WB_F_SUSPENDED, &wb->flags);
	wake_up_all(&wb->wait);		/* a waiting drop_caches gives up */
	/*
	 * A read-cache injection may wait for writeback: it ends (dropping
	 * its cells, the flag is set) before the threads stop.
	 */
	wb_drain_ordered_queue(wb->io_wq);
	flush_work(&wb->rc_work);	/* a no-op unless queued again since */
	wb_stop_daemons(wb);
	if (test_bit(WB_F_STARTED, &wb->flags) &&
	    !wb_wait_flushed(wb, wb_seal_for_flush(wb)))
		/* Segments go without FUA unless a bio waits: make them durable. */
		wb_flush_dev(wb, WB_DEV_CACHE);
	/*
	 * The flusher may still be running a round it started before (a
	 * cache flush for commits, completing waiters); quiet means it ended.
	 */
	wb_drain_ordered_queue(wb->flush_wq);
	flush_work(&wb->flush_work);
}

/*
 * write_around_mode 1 logs no write, so nothing may be dirty when it goes
 * live: a log replayed with dirty data (a cache that ran in write-back
 * mode) is written back first. dm-writeboost formats the cache in this
 * mode instead, which would lose that data.
 *
 * Then the superblock record is set to last_writeback_id (FUA), before any
 * write goes around the cache. Write-around writes change the backing
 * device without a log entry, so a later replay must not take any dirty
 * entry still in the log for data to write back: without the record, it
 * could infer a lower last_writeback_id (one lap behind) and write old
 * data over theirs.
 */
static int wb_write_around_start(struct wb_device *wb)
{
	u64 id = READ_ONCE(wb->last_flushed_id);
	void *blk;
	int r = 0;

	if (READ_ONCE(wb->last_writeback_id) < id) {
		DMINFO("write_around_mode 1: writing back the replayed log first");
		atomic_inc(&wb->drop_caches);
		wake_up(&wb->writeback_wait);
		r = wait_event_killable(wb->wait,
					READ_ONCE(wb->last_writeback_id) >= id ||
					wb_dead(wb));
		atomic_dec(&wb->drop_caches);
	}
	if (!r && wb_dead(wb))
		r = -EIO;
	if (!r && READ_ONCE(wb->last_writeback_id)) {
		blk = (void *)__get_free_page(GFP_KERNEL);
		if (!blk) {
			r = -ENOMEM;
		} else {
			wb_write_sb_record(wb, blk, READ_ONCE(wb->last_writeback_id));
			free_page((unsigned long)blk);
			if (wb_dead(wb))
				r = -EIO;
		}
	}
	/*
	 * From the first write that goes around, no copy on the cache device
	 * can be trusted after a restart, not even those this session logs.
	 */
	if (!r && wb->trusted_from_id != WB_TRUST_NONE) {
		r = wb_write_trust(wb, WB_TRUST_NONE);
		if (!r && wb_dead(wb))
			r = -EIO;
	}
	if (r)
		DMERR("cannot resume: write_around_mode 1 needs the log written back and recorded first (%d)",
		      r);
	return r;
}

/*
 * The first preresume of an instance formats or replays the cache: only
 * now is the instance about to go live, and the one it replaces (if this
 * is a reload) is suspended and quiet. Every preresume starts the kthreads.
 */
static int writeboost_preresume(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;
	char *error = NULL;
	int r;

	if (!test_bit(WB_F_STARTED, &wb->flags)) {
		r = wb_format_or_replay(wb, &error);
		if (r) {
			DMERR("cannot resume: %s (%d)", error, r);
			return r;
		}
		/* The replayed ids before the bit: see wb_drop_caches. */
		smp_mb__before_atomic();
		set_bit(WB_F_STARTED, &wb->flags);
	}
	if (!wb->writeback_task) {
		r = wb_start_daemons(wb);
		if (r) {
			DMERR("cannot start the writeback and periodic threads (%d)",
			      r);
			return r;
		}
	}
	if (wb->write_around) {
		r = wb_write_around_start(wb);
		if (r) {
			/* The device stays suspended: quiet, as after postsuspend. */
			wb_stop_daemons(wb);
			return r;
		}
	}
	return 0;
}

static void writeboost_resume(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	clear_bit(WB_F_SUSPENDING, &wb->flags);
	clear_bit(WB_F_SUSPENDED, &wb->flags);
	wake_up(&wb->writeback_wait);
}

static int writeboost_iterate_devices(struct dm_target *ti,
				      iterate_devices_callout_fn fn, void *data)
{
	struct wb_device *wb = ti->private;
	int r;

	r = fn(ti, wb->backing_dev, 0, ti->len, data);
	if (!r)
		r = fn(ti, wb->cache_dev, 0, wb->cache_sectors, data);
	return r;
}

static void writeboost_io_hints(struct dm_target *ti,
				struct queue_limits *limits)
{
	/*
	 * Whole cache blocks are the cheap case: no merge with older data.
	 * (blk_limits_io_opt, which only set this, is gone in 6.11.)
	 */
	limits->io_opt = WB_BLOCK_SIZE;
	/*
	 * Only whole blocks are discarded (wb_discard). The size is ours, not
	 * the backing device's: the block layer splits our passdown for it.
	 */
	limits->discard_granularity = WB_BLOCK_SIZE;
	limits->discard_alignment = 0;
	limits->max_hw_discard_sectors = WB_MAX_DISCARD_SECTORS;
	limits->max_discard_sectors = WB_MAX_DISCARD_SECTORS;
}

/*
 * Another name lets this module load next to upstream's dm-writeboost, which
 * registers "writeboost" too: both targets side by side in one boot, for a
 * comparison (bench/vm-fastpath.sh) or a migration test.
 */
static char *target_name = "writeboost";
module_param(target_name, charp, 0444);
MODULE_PARM_DESC(target_name,
		 "device-mapper target type to register (default writeboost)");

static struct target_type writeboost_target = {
	/* The project's version, so `dmsetup targets` tells this module from upstream's. */
	.version = { WBKIT_VERSION_MAJOR, WBKIT_VERSION_MINOR, WBKIT_VERSION_PATCH },
	.module = THIS_MODULE,
	.ctr = writeboost_ctr,
	.dtr = writeboost_dtr,
	.map = writeboost_map,
	.end_io = writeboost_end_io,
	.presuspend = writeboost_presuspend,
	.presuspend_undo = writeboost_presuspend_undo,
	.postsuspend = writeboost_postsuspend,
	.preresume = writeboost_preresume,
	.resume = writeboost_resume,
	.message = writeboost_message,
	.status = writeboost_status,
	.iterate_devices = writeboost_iterate_devices,
	.io_hints = writeboost_io_hints,
};

static int __init dm_wbkit_init(void)
{
	int r;

	if (!target_name || !*target_name || strlen(target_name) >= 32) {
		DMERR("target_name must be 1 to 31 characters");
		return -EINVAL;
	}
	writeboost_target.name = target_name;
	r = dm_register_target(&writeboost_target);
	if (r)
		DMERR("cannot register the %s target (%d): is dm-writeboost loaded? Load this module with target_name=<another name> to run both",
		      target_name, r);
	return r;
}

static void __exit dm_wbkit_exit(void)
{
	dm_unregister_target(&writeboost_target);
}

module_init(dm_wbkit_init);
module_exit(dm_wbkit_exit);

MODULE_AUTHOR("wbkit");
MODULE_DESCRIPTION(DM_NAME " write-back cache target (dm-writeboost 2.2 on-disk format)");
MODULE_LICENSE("GPL");
MODULE_SOFTDEP("pre: crc32c");
MODULE_VERSION(WBKIT_VERSION);
/* dm core autoloads a target type with request_module("dm-<name>"). */
MODULE_ALIAS("dm-writeboost");
