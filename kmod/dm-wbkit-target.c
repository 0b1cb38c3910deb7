// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-target.c - the "writeboost" device-mapper target: bio path,
 * constructor and destructor, status and messages.
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

/* ---------------------------------------------------------------------- */
/* Helpers */

static u8 wb_bio_bits(unsigned int off, unsigned int n)
{
	return (u8)(((1U << n) - 1) << off);
}

static void wb_copy_from_bio(void *dst, struct bio *bio)
{
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		memcpy_from_bvec(dst, &bv);
		dst += bv.bv_len;
	}
}

static void wb_copy_to_bio(struct bio *bio, const void *src)
{
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		memcpy_to_bvec(&bv, src);
		src += bv.bv_len;
	}
}

static void wb_stat_inc(struct wb_device *wb, bool write, bool hit,
			bool on_buffer, bool fullsize)
{
	atomic64_inc(&wb->stat[(write << 3) | (hit << 2) | (on_buffer << 1) |
			       fullsize]);
}

/* Data of a block's cached copy: from its RAM buffer or the cache device. */
static int wb_read_mb(struct wb_device *wb, struct wb_metablock *mb, void *dst)
{
	struct wb_segment *seg = wb_mb_seg(wb, mb);

	if (seg->buf) {
		memcpy(dst, seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb)),
		       WB_BLOCK_SIZE);
		return 0;
	}
	return wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_READ,
			  wb_mb_cache_sector(wb, mb), dst, WB_BLOCK_SIZE);
}

static bool wb_slot_free(struct wb_device *wb, u64 id)
{
	return wb_previous_lap_id(id, wb->nr_segments) <=
	       READ_ONCE(wb->last_writeback_id);
}

/*
 * Makes sure there is an open segment with room. Called with wb->lock
 * held; drops it while waiting for a RAM buffer or for the writeback of the
 * segment that still occupies the next slot of the ring.
 */
static int wb_get_cur(struct wb_device *wb)
{
	struct wb_segment *seg;
	unsigned int j;
	u64 id;

	while (!wb->cur) {
		id = wb->last_sealed_id + 1;
		if (wb_dead(wb))
			return -EIO;
		if (!wb_slot_free(wb, id)) {
			wake_up(&wb->wb_wait);
			mutex_unlock(&wb->lock);
			wait_event(wb->wait, wb_slot_free(wb, id) || wb_dead(wb));
			mutex_lock(&wb->lock);
			continue;
		}
		if (!wb->nr_free_rambuf) {
			mutex_unlock(&wb->lock);
			wait_event(wb->wait, READ_ONCE(wb->nr_free_rambuf) ||
				   wb_dead(wb));
			mutex_lock(&wb->lock);
			continue;
		}

		seg = wb_seg_of_id(wb, id);
		/* Written back: none of its blocks is still the newest dirty copy. */
		for (j = 0; j < WB_BLOCKS_PER_SEGMENT; j++)
			if (!hlist_unhashed(&seg->mb[j].ht_node))
				wb_ht_del(wb, &seg->mb[j]);
		seg->id = id;
		seg->length = 0;
		seg->buf = wb->free_rambuf[--wb->nr_free_rambuf];
		memset(seg->buf, 0, WB_BLOCK_SIZE);
		wb->cur = seg;
	}
	return 0;
}

static int wb_wait_flushed(struct wb_device *wb, u64 id)
{
	wait_event(wb->wait, READ_ONCE(wb->last_flushed_id) >= id ||
		   wb_dead(wb));
	return wb_dead(wb) ? -EIO : 0;
}

/* Seals what is open and returns the id that must be flushed. */
static u64 wb_seal_for_flush(struct wb_device *wb)
{
	u64 id;

	mutex_lock(&wb->lock);
	wb_seal(wb);
	id = wb->last_sealed_id;
	mutex_unlock(&wb->lock);
	return id;
}

/* ---------------------------------------------------------------------- */
/* Bio path */

/*
 * A write of up to one 4 KiB block (the target splits at 8 sectors). It
 * lands in the open RAM buffer segment; a partial write merges the older
 * dirty sectors of the block, so the newest copy always holds every dirty
 * sector of its block. REQ_PREFLUSH and REQ_FUA complete only after the
 * segment holding this write is on the cache device (written with
 * PREFLUSH|FUA, in id order, so every earlier segment is durable too).
 */
static int wb_write(struct wb_device *wb, struct bio *bio, sector_t sector)
{
	sector_t block = sector & ~(sector_t)(WB_BLOCK_SECTORS - 1);
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	u8 bits = wb_bio_bits(off, n);
	struct wb_metablock_device *md;
	struct wb_metablock *old, *mb;
	struct wb_segment *seg;
	bool on_buffer;
	u64 flush_id = 0;
	void *dst;
	int err;

	mutex_lock(&wb->lock);
	err = wb_get_cur(wb);
	if (err)
		goto out;
	seg = wb->cur;
	old = wb_ht_lookup(wb, block);
	on_buffer = old && wb_mb_seg(wb, old) == seg;
	wb_stat_inc(wb, true, old != NULL, on_buffer, n == WB_BLOCK_SECTORS);

	if (on_buffer) {
		/* Overwrite in place in the open segment. */
		mb = old;
		dst = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
		mb->dirty_bits |= bits;
	} else {
		u8 idx = seg->length;
		u8 new_bits = bits;

		mb = &seg->mb[idx];
		dst = seg->buf + WB_BLOCK_SIZE * (1 + idx);
		if (old) {
			u8 keep = old->dirty_bits & ~bits;

			if (keep) {
				err = wb_read_mb(wb, old, dst);
				if (err)
					goto out;
				new_bits |= keep;
			}
			wb_ht_del(wb, old);
		}
		/* Clean sectors of the block are never read; keep them zero. */
		if (new_bits != WB_ALL_DIRTY && new_bits == bits)
			memset(dst, 0, WB_BLOCK_SIZE);
		mb->sector = block;
		mb->dirty_bits = new_bits;
		mb->obsolete = false;
		wb_ht_add(wb, mb);
		seg->length++;
	}
	wb_copy_from_bio(dst + (off << WB_SECTOR_SHIFT), bio);

	md = seg->buf + WB_METABLOCK_OFFSET(wb_mb_idx(wb, mb));
	md->sector = cpu_to_le64(mb->sector);
	md->dirty_bits = mb->dirty_bits;

	if (bio->bi_opf & (REQ_PREFLUSH | REQ_FUA))
		flush_id = seg->id;
	if (flush_id || seg->length == WB_BLOCKS_PER_SEGMENT)
		wb_seal(wb);
out:
	mutex_unlock(&wb->lock);
	if (!err && flush_id)
		err = wb_wait_flushed(wb, flush_id);
	return err;
}

/*
 * A read of up to one block: the newest copy from the RAM buffer or the
 * cache device, merged with the backing device for the sectors that copy
 * does not hold; a miss is remapped to the backing device. Returns 1 when
 * the bio was remapped and submitted.
 */
static int wb_read(struct wb_device *wb, struct bio *bio, sector_t sector)
{
	sector_t block = sector & ~(sector_t)(WB_BLOCK_SECTORS - 1);
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	u8 want = wb_bio_bits(off, n), dirty;
	struct wb_per_bio *pb;
	struct wb_metablock *mb;
	void *buf = wb->bounce;
	int err = 0;
	unsigned int j;

	mutex_lock(&wb->lock);
	if (wb_dead(wb)) {
		err = -EIO;
		goto out;
	}
	mb = wb_ht_lookup(wb, block);
	if (!mb) {
		mutex_unlock(&wb->lock);
		wb_stat_inc(wb, false, false, false, n == WB_BLOCK_SECTORS);
		pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
		pb->remapped = true;
		pb->sector = sector;
		bio_set_dev(bio, wb->backing_dev->bdev);
		bio->bi_iter.bi_sector = sector;
		dm_submit_bio_remap(bio, NULL);
		return 1;
	}

	wb_stat_inc(wb, false, true, wb_mb_seg(wb, mb) == wb->cur,
		    n == WB_BLOCK_SECTORS);
	dirty = mb->dirty_bits & want;
	if (want & ~dirty) {
		err = wb_sync_io(wb, WB_DEV_BACKING, REQ_OP_READ, sector,
				 buf + (off << WB_SECTOR_SHIFT),
				 n << WB_SECTOR_SHIFT);
		if (err)
			goto out;
	}
	if (dirty) {
		err = wb_read_mb(wb, mb, wb->bounce2);
		if (err)
			goto out;
		for (j = 0; j < WB_BLOCK_SECTORS; j++)
			if (dirty & (1U << j))
				memcpy(buf + (j << WB_SECTOR_SHIFT),
				       wb->bounce2 + (j << WB_SECTOR_SHIFT),
				       WB_SECTOR_SIZE);
	}
	wb_copy_to_bio(bio, buf + (off << WB_SECTOR_SHIFT));
out:
	mutex_unlock(&wb->lock);
	return err;
}

static void wb_process_bio(struct wb_device *wb, struct bio *bio)
{
	sector_t sector = dm_target_offset(wb->ti, bio->bi_iter.bi_sector);
	int err;

	if (wb_dead(wb)) {
		err = -EIO;
	} else if (!bio_sectors(bio)) {
		/* Empty flush: everything written so far, on the cache device. */
		err = wb_wait_flushed(wb, wb_seal_for_flush(wb));
	} else if (bio_op(bio) == REQ_OP_WRITE) {
		err = wb_write(wb, bio, sector);
	} else if (bio_op(bio) == REQ_OP_READ) {
		err = wb_read(wb, bio, sector);
		if (err > 0)
			return;
	} else {
		err = -EOPNOTSUPP;
	}
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
}

static void wb_io_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device, io_work);
	struct bio_list bios;
	struct bio *bio;

	spin_lock_irq(&wb->bio_lock);
	bios = wb->deferred;
	bio_list_init(&wb->deferred);
	spin_unlock_irq(&wb->bio_lock);

	while ((bio = bio_list_pop(&bios))) {
		wb_process_bio(wb, bio);
		cond_resched();
	}
}

/*
 * Every bio goes to one ordered worker, which may sleep and do synchronous
 * I/O; a dead target fails it at once.
 */
static int writeboost_map(struct dm_target *ti, struct bio *bio)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	pb->remapped = false;
	if (wb_dead(wb))
		return DM_MAPIO_KILL;

	spin_lock_irq(&wb->bio_lock);
	bio_list_add(&wb->deferred, bio);
	spin_unlock_irq(&wb->bio_lock);
	queue_work(wb->io_wq, &wb->io_work);
	return DM_MAPIO_SUBMITTED;
}

/* Only a read miss reaches a device as is; its error kills the target too. */
static int writeboost_end_io(struct dm_target *ti, struct bio *bio,
			     blk_status_t *error)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	if (pb->remapped && *error && *error != BLK_STS_AGAIN &&
	    *error != BLK_STS_RESOURCE)
		wb_set_dead(wb, WB_DEV_BACKING, "read", pb->sector,
			    blk_status_to_errno(*error));
	return DM_ENDIO_DONE;
}

/* ---------------------------------------------------------------------- */
/* Constructor and destructor */

struct wb_tunable_def {
	const char *name;
	struct dm_arg arg;
	unsigned int def;
};

static const struct wb_tunable_def wb_tunables[WB_T_NR] = {
	[WB_T_WRITEBACK_THRESHOLD] = {
		"writeback_threshold",
		{ 0, 100, "writeback_threshold must be 0..100 (percent)" }, 0 },
	[WB_T_NR_MAX_BATCHED_WRITEBACK] = {
		"nr_max_batched_writeback",
		{ 1, WB_MAX_BATCH, "nr_max_batched_writeback must be 1..32" },
		WB_MAX_BATCH },
	[WB_T_UPDATE_SB_RECORD_INTERVAL] = {
		"update_sb_record_interval",
		{ 0, 3600, "update_sb_record_interval must be 0..3600 (seconds)" },
		0 },
	[WB_T_SYNC_DATA_INTERVAL] = {
		"sync_data_interval",
		{ 0, 3600, "sync_data_interval must be 0..3600 (seconds)" }, 0 },
	[WB_T_READ_CACHE_THRESHOLD] = {
		"read_cache_threshold",
		{ 0, 127, "read_cache_threshold must be 0..127" }, 0 },
	[WB_T_WRITE_AROUND_MODE] = {
		"write_around_mode",
		{ 0, 1, "write_around_mode must be 0 or 1" }, 0 },
};

static int wb_tunable_index(const char *key)
{
	int t;

	for (t = 0; t < WB_T_NR; t++)
		if (!strcasecmp(key, wb_tunables[t].name))
			return t;
	return -1;
}

/* Features that dm-writeboost has and this target does not. */
static const char *wb_unsupported(int t, unsigned int val)
{
	if (t == WB_T_READ_CACHE_THRESHOLD && val)
		return "read_cache_threshold other than 0 is not supported: this target does not cache reads";
	if (t == WB_T_WRITE_AROUND_MODE && val)
		return "write_around_mode 1 is not supported: this target only does write-back";
	return NULL;
}

static int wb_parse_optargs(struct wb_device *wb, struct dm_arg_set *as,
			    char **error)
{
	static const struct dm_arg nr_args = {
		0, 2 * WB_T_NR, "Invalid number of optional arguments"
	};
	unsigned int argc, val;
	const char *key;
	int t, r;

	if (!as->argc)
		return 0;
	r = dm_read_arg(&nr_args, as, &argc, error);
	if (r)
		return r;
	if (argc % 2 || argc > as->argc) {
		*error = "Optional arguments must be <key> <value> pairs";
		return -EINVAL;
	}
	while (argc) {
		key = dm_shift_arg(as);
		argc -= 2;
		t = wb_tunable_index(key);
		if (t < 0) {
			*error = "Unknown optional argument";
			return -EINVAL;
		}
		r = dm_read_arg(&wb_tunables[t].arg, as, &val, error);
		if (r)
			return r;
		if (wb_unsupported(t, val)) {
			*error = (char *)wb_unsupported(t, val);
			return -EINVAL;
		}
		wb->tunable[t] = val;
		wb->ctr_given |= 1U << t;
	}
	if (as->argc) {
		*error = "Too many arguments";
		return -EINVAL;
	}
	return 0;
}

static void wb_destroy(struct wb_device *wb)
{
	struct dm_target *ti = wb->ti;
	unsigned int i;

	if (wb->periodic_task)
		kthread_stop(wb->periodic_task);
	if (wb->wb_task)
		kthread_stop(wb->wb_task);
	if (wb->io_wq)
		destroy_workqueue(wb->io_wq);
	if (wb->flush_wq) {
		/* Normally postsuspend did this already. */
		mutex_lock(&wb->lock);
		wb_seal(wb);
		mutex_unlock(&wb->lock);
		destroy_workqueue(wb->flush_wq);	/* drains it */
	}

	for (i = 0; i < WB_MAX_BATCH; i++)
		vfree(wb->wb_buf[i]);
	kvfree(wb->wb_entries);
	for (i = 0; i < WB_NR_RAMBUF; i++)
		vfree(wb->rambuf[i]);
	free_page((unsigned long)wb->bounce);
	free_page((unsigned long)wb->bounce2);
	free_page((unsigned long)wb->zero_block);
	kvfree(wb->htable);
	kvfree(wb->mbs);
	kvfree(wb->segs);
	if (wb->cache_dev)
		dm_put_device(ti, wb->cache_dev);
	if (wb->backing_dev)
		dm_put_device(ti, wb->backing_dev);
	kfree(wb);
}

static int wb_alloc_metadata(struct wb_device *wb)
{
	unsigned long nr_blocks = wb->nr_segments * WB_BLOCKS_PER_SEGMENT;
	unsigned int i;
	u64 k;

	wb->segs = kvcalloc(wb->nr_segments, sizeof(*wb->segs),
			    GFP_KERNEL | __GFP_NOWARN);
	wb->mbs = kvcalloc(nr_blocks, sizeof(*wb->mbs),
			   GFP_KERNEL | __GFP_NOWARN);
	wb->htable_bits = clamp_t(unsigned int,
				  ilog2(roundup_pow_of_two(nr_blocks)), 10, 28);
	wb->htable = kvcalloc(1UL << wb->htable_bits, sizeof(*wb->htable),
			      GFP_KERNEL | __GFP_NOWARN);
	if (!wb->segs || !wb->mbs || !wb->htable)
		return -ENOMEM;
	for (k = 0; k < wb->nr_segments; k++) {
		wb->segs[k].slot = (u32)k;
		wb->segs[k].mb = &wb->mbs[k * WB_BLOCKS_PER_SEGMENT];
		INIT_LIST_HEAD(&wb->segs[k].flush_node);
	}
	for (i = 0; i < WB_NR_RAMBUF; i++) {
		wb->rambuf[i] = vmalloc(WB_SEGMENT_SIZE);
		if (!wb->rambuf[i])
			return -ENOMEM;
		wb->free_rambuf[wb->nr_free_rambuf++] = wb->rambuf[i];
	}
	for (i = 0; i < WB_MAX_BATCH; i++) {
		wb->wb_buf[i] = vmalloc(WB_BLOCKS_PER_SEGMENT * WB_BLOCK_SIZE);
		if (!wb->wb_buf[i])
			return -ENOMEM;
	}
	wb->wb_entries = kvcalloc(WB_MAX_BATCH * WB_BLOCKS_PER_SEGMENT,
				  sizeof(*wb->wb_entries), GFP_KERNEL);
	wb->bounce = (void *)__get_free_page(GFP_KERNEL);
	wb->bounce2 = (void *)__get_free_page(GFP_KERNEL);
	wb->zero_block = (void *)get_zeroed_page(GFP_KERNEL);
	if (!wb->wb_entries || !wb->bounce || !wb->bounce2 || !wb->zero_block)
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
 *       read_cache_threshold (only 0), write_around_mode (only 0).
 *
 * A cache device whose superblock magic is not "WBst" is formatted; any
 * other is replayed.
 */
static int writeboost_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct wb_device *wb;
	int t, r;

	if (argc < 2) {
		ti->error = "Usage: <backing_dev> <cache_dev> [<#optargs> <key> <value> ...]";
		return -EINVAL;
	}

	wb = kzalloc(sizeof(*wb), GFP_KERNEL);
	if (!wb) {
		ti->error = "Cannot allocate the target context";
		return -ENOMEM;
	}
	ti->private = wb;
	wb->ti = ti;
	mutex_init(&wb->lock);
	init_waitqueue_head(&wb->wait);
	init_waitqueue_head(&wb->wb_wait);
	INIT_LIST_HEAD(&wb->flush_queue);
	spin_lock_init(&wb->bio_lock);
	bio_list_init(&wb->deferred);
	INIT_WORK(&wb->io_work, wb_io_work);
	INIT_WORK(&wb->flush_work, wb_flush_work);
	atomic_set(&wb->drop_caches, 0);
	for (t = 0; t < WB_STATLEN; t++)
		atomic64_set(&wb->stat[t], 0);
	atomic64_set(&wb->nr_partial_flushed, 0);
	for (t = 0; t < WB_T_NR; t++)
		wb->tunable[t] = wb_tunables[t].def;

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
	r = wb_parse_optargs(wb, &as, &ti->error);
	if (r)
		goto bad;

	wb->cache_sectors = bdev_nr_sectors(wb->cache_dev->bdev);
	wb->backing_sectors = bdev_nr_sectors(wb->backing_dev->bdev);
	wb->nr_segments = wb_nr_segments(wb->cache_sectors);
	if (!wb->nr_segments) {
		ti->error = "The cache device is smaller than 1.5 MiB (the superblock region and one segment)";
		r = -EINVAL;
		goto bad;
	}
	if (wb->nr_segments > U32_MAX) {
		ti->error = "The cache device is too large (more than 2^32 segments)";
		r = -EINVAL;
		goto bad;
	}
	if (ti->len > wb->backing_sectors) {
		ti->error = "The target is longer than the backing device";
		r = -EINVAL;
		goto bad;
	}

	r = wb_alloc_metadata(wb);
	if (r) {
		ti->error = "Not enough memory for the metadata of this cache device";
		goto bad;
	}

	r = wb_format_or_replay(wb, &ti->error);
	if (r)
		goto bad;

	wb->io_wq = alloc_ordered_workqueue("wbkit_io", WQ_MEM_RECLAIM);
	wb->flush_wq = alloc_ordered_workqueue("wbkit_flush", WQ_MEM_RECLAIM);
	if (!wb->io_wq || !wb->flush_wq) {
		ti->error = "Cannot create the workqueues";
		r = -ENOMEM;
		goto bad;
	}
	wb->wb_task = kthread_run(wb_writeback_daemon, wb, "wbkit_writeback");
	if (IS_ERR(wb->wb_task)) {
		r = PTR_ERR(wb->wb_task);
		wb->wb_task = NULL;
		ti->error = "Cannot start the writeback daemon";
		goto bad;
	}
	wb->periodic_task = kthread_run(wb_periodic_daemon, wb, "wbkit_periodic");
	if (IS_ERR(wb->periodic_task)) {
		r = PTR_ERR(wb->periodic_task);
		wb->periodic_task = NULL;
		ti->error = "Cannot start the periodic daemon";
		goto bad;
	}

	r = dm_set_target_max_io_len(ti, WB_BLOCK_SECTORS);
	if (r) {
		ti->error = "Cannot set the maximum I/O size";
		goto bad;
	}
	ti->num_flush_bios = 1;
	ti->flush_supported = true;
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

/* Everything transient reaches the cache device: RAM buffer, then flush. */
static void writeboost_postsuspend(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	set_bit(WB_F_SUSPENDED, &wb->flags);
	if (wb_wait_flushed(wb, wb_seal_for_flush(wb)))
		return;
	/* Each segment went with FUA already; this covers anything else. */
	wb_flush_dev(wb, WB_DEV_CACHE);
}

static void writeboost_resume(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	clear_bit(WB_F_SUSPENDED, &wb->flags);
	wake_up(&wb->wb_wait);
}

/* ---------------------------------------------------------------------- */
/* Messages and status */

/* Writes back everything, waiting interruptibly. */
static int wb_drop_caches(struct wb_device *wb)
{
	u64 id;
	int r;

	atomic_inc(&wb->drop_caches);
	id = wb_seal_for_flush(wb);
	wake_up(&wb->wb_wait);
	r = wait_event_interruptible(wb->wait,
				     READ_ONCE(wb->last_writeback_id) >= id ||
				     wb_dead(wb));
	atomic_dec(&wb->drop_caches);
	if (r)
		return r;
	return wb_dead(wb) ? -EIO : 0;
}

/*
 * dmsetup message <dev> 0 <key> <value>     (the tunables of the table line)
 * dmsetup message <dev> 0 drop_caches       (write back everything, wait)
 * dmsetup message <dev> 0 clear_stat
 */
static int writeboost_message(struct dm_target *ti, unsigned int argc,
			      char **argv, char *result, unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	unsigned int val;
	int t;

	if (argc == 1 && !strcasecmp(argv[0], "drop_caches"))
		return wb_drop_caches(wb);
	if (argc == 1 && !strcasecmp(argv[0], "clear_stat")) {
		for (t = 0; t < WB_STATLEN; t++)
			atomic64_set(&wb->stat[t], 0);
		atomic64_set(&wb->nr_partial_flushed, 0);
		return 0;
	}
	if (argc != 2) {
		DMWARN("unknown message: use <key> <value>, drop_caches or clear_stat");
		return -EINVAL;
	}
	t = wb_tunable_index(argv[0]);
	if (t < 0) {
		DMWARN("unknown message key %s", argv[0]);
		return -EINVAL;
	}
	if (kstrtouint(argv[1], 10, &val) || val < wb_tunables[t].arg.min ||
	    val > wb_tunables[t].arg.max) {
		DMWARN("%s", wb_tunables[t].arg.error);
		return -EINVAL;
	}
	if (wb_unsupported(t, val)) {
		DMWARN("%s", wb_unsupported(t, val));
		return -EINVAL;
	}
	WRITE_ONCE(wb->tunable[t], val);
	wake_up(&wb->wb_wait);
	return 0;
}

/*
 * Status (STATUSTYPE_INFO), dm-writeboost's fields in its order, then ours:
 *
 *   <cursor_pos> <nr_cache_blocks> <nr_segments> <current_id>
 *   <last_flushed_id> <last_writeback_id> <nr_dirty_cache_blocks>
 *   <stat * 16> <nr_partial_flushed>
 *   10 writeback_threshold <n> nr_cur_batched_writeback <n>
 *      sync_data_interval <n> update_sb_record_interval <n>
 *      read_cache_threshold <n>
 *   dead <0|1> <cause>
 *
 * stat index = write << 3 | hit << 2 | on_buffer << 1 | fullsize.
 * cause is "-" while alive, else <cache|backing>:<read|write|flush>:
 * <sector>:<errno>, e.g. "cache:write:5120:-5".
 */
static void writeboost_status(struct dm_target *ti, status_type_t type,
			      unsigned int status_flags, char *result,
			      unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	struct wb_segment *cur = READ_ONCE(wb->cur);
	unsigned int sz = 0, i, nargs = 0;
	u64 cursor, cur_id;

	switch (type) {
	case STATUSTYPE_INFO:
		cur_id = cur ? cur->id : READ_ONCE(wb->last_sealed_id) + 1;
		cursor = (u64)wb_id_to_slot(wb, cur_id) * WB_BLOCKS_PER_SEGMENT +
			 (cur ? cur->length : 0);
		DMEMIT("%llu %llu %llu %llu %llu %llu %llu",
		       (unsigned long long)cursor,
		       (unsigned long long)wb->nr_segments * WB_BLOCKS_PER_SEGMENT,
		       (unsigned long long)wb->nr_segments,
		       (unsigned long long)cur_id,
		       (unsigned long long)READ_ONCE(wb->last_flushed_id),
		       (unsigned long long)READ_ONCE(wb->last_writeback_id),
		       (unsigned long long)READ_ONCE(wb->nr_dirty));
		for (i = 0; i < WB_STATLEN; i++)
			DMEMIT(" %lld", (long long)atomic64_read(&wb->stat[i]));
		DMEMIT(" %lld", (long long)atomic64_read(&wb->nr_partial_flushed));
		DMEMIT(" 10 writeback_threshold %u nr_cur_batched_writeback %u sync_data_interval %u update_sb_record_interval %u read_cache_threshold %u",
		       READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]),
		       READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]),
		       READ_ONCE(wb->tunable[WB_T_SYNC_DATA_INTERVAL]),
		       READ_ONCE(wb->tunable[WB_T_UPDATE_SB_RECORD_INTERVAL]),
		       READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]));
		if (!wb_dead(wb)) {
			DMEMIT(" dead 0 -");
		} else {
			smp_rmb();
			DMEMIT(" dead 1 %s:%s:%llu:%d",
			       wb->cause.dev == WB_DEV_CACHE ? "cache" : "backing",
			       wb->cause.op, (unsigned long long)wb->cause.sector,
			       wb->cause.err);
		}
		break;

	case STATUSTYPE_TABLE:
		DMEMIT("%s %s", wb->backing_dev->name, wb->cache_dev->name);
		for (i = 0; i < WB_T_NR; i++)
			if (wb->ctr_given & (1U << i))
				nargs += 2;
		if (!nargs)
			break;
		DMEMIT(" %u", nargs);
		for (i = 0; i < WB_T_NR; i++)
			if (wb->ctr_given & (1U << i))
				DMEMIT(" %s %u", wb_tunables[i].name,
				       READ_ONCE(wb->tunable[i]));
		break;

	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
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
	/* Whole cache blocks are the cheap case: no merge with older data. */
	blk_limits_io_opt(limits, WB_BLOCK_SIZE);
}

static struct target_type writeboost_target = {
	.name = "writeboost",
	/* The project's version, so `dmsetup targets` tells this module from upstream's. */
	.version = { WBKIT_VERSION_MAJOR, WBKIT_VERSION_MINOR, WBKIT_VERSION_PATCH },
	.module = THIS_MODULE,
	.ctr = writeboost_ctr,
	.dtr = writeboost_dtr,
	.map = writeboost_map,
	.end_io = writeboost_end_io,
	.postsuspend = writeboost_postsuspend,
	.resume = writeboost_resume,
	.message = writeboost_message,
	.status = writeboost_status,
	.iterate_devices = writeboost_iterate_devices,
	.io_hints = writeboost_io_hints,
};

static int __init dm_wbkit_init(void)
{
	int r = dm_register_target(&writeboost_target);

	if (r)
		DMERR("cannot register the writeboost target (%d): is dm-writeboost loaded? The two modules cannot be loaded together",
		      r);
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
