// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-rcache.c - the read cache (read_cache_threshold,
 * nr_read_cache_cells), as dm-writeboost: full 4 KiB read misses are staged
 * in cells and injected into the log as clean blocks.
 */
#include <linux/bio.h>
#include <linux/hash.h>
#include <linux/sort.h>
#include <linux/vmalloc.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Read cache (read_cache_threshold, nr_read_cache_cells), as dm-writeboost */

static struct hlist_head *wb_rc_head(struct wb_device *wb, sector_t block)
{
	return &wb->rc_hash[hash_64(block >> 3, wb->rc_hash_bits)];
}

static struct wb_rc_cell *wb_rc_lookup(struct wb_device *wb, sector_t block)
{
	struct wb_rc_cell *cell;

	hlist_for_each_entry(cell, wb_rc_head(wb, block), node)
		if (cell->sector == block)
			return cell;
	return NULL;
}

/* A write makes a staged copy of its block stale. Called with wb->lock held. */
void wb_rc_invalidate(struct wb_device *wb, sector_t block)
{
	struct wb_rc_cell *cell;

	if (wb->rc_nr_free == wb->rc_nr)
		return;
	cell = wb_rc_lookup(wb, block);
	if (cell)
		cell->cancelled = true;
}

/*
 * Only random reads are cached: once a run of consecutive blocks read grows
 * beyond read_cache_threshold, the run's cells and every later one of it
 * are cancelled. The run's cells are the newest: idx and up.
 */
static void wb_rc_cancel_sequential(struct wb_device *wb, u32 idx,
				    unsigned int thr)
{
	struct wb_rc_cell *cell = &wb->rc_cells[idx];
	u32 i, last;

	if (cell->sector == wb->rc_last_sector + WB_BLOCK_SECTORS) {
		wb->rc_seqcount++;
	} else {
		wb->rc_seqcount = 1;
		wb->rc_over_threshold = false;
	}
	wb->rc_last_sector = cell->sector;
	if (wb->rc_seqcount <= thr)
		return;
	if (wb->rc_over_threshold) {
		cell->cancelled = true;
		return;
	}
	wb->rc_over_threshold = true;
	last = min_t(u32, idx + wb->rc_seqcount, wb->rc_nr);
	for (i = idx; i < last; i++)
		wb->rc_cells[i].cancelled = true;
}

/*
 * The cells' data exists only once read caching has been on (see
 * WB_NR_SPARE_BUFS) and stays until the destructor: a staged read may still
 * copy into it after read caching is switched off. wb_rc_reserve reads the
 * threshold under wb->lock, and rc_data is set under it before the
 * threshold is, so a cell is only ever staged with its data allocated.
 */
int wb_rc_alloc_data(struct wb_device *wb)
{
	void *data;

	if (READ_ONCE(wb->rc_data))
		return 0;
	data = vmalloc(array_size(wb->rc_nr, WB_BLOCK_SIZE));
	if (!data)
		return -ENOMEM;
	spin_lock(&wb->lock);
	if (!wb->rc_data) {
		wb->rc_data = data;
		data = NULL;
	}
	spin_unlock(&wb->lock);
	vfree(data);	/* a concurrent message allocated it first */
	return 0;
}

/*
 * Stages a full 4 KiB read miss of block: the caller remaps the read to the
 * backing device, and its data goes into the cell when it ends. Called
 * with wb->lock held.
 */
bool wb_rc_reserve(struct wb_device *wb, struct wb_per_bio *pb,
		   sector_t block)
{
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]);
	struct wb_rc_cell *cell;
	u32 idx;

	if (!thr || !wb->rc_nr_free || wb_rc_lookup(wb, block))
		return false;
	/*
	 * A write-around write in flight may land after this read has read
	 * the block: its data could be stale. (One that starts later cancels
	 * the cell.)
	 */
	if (atomic_read(&wb->nr_wa_inflight))
		return false;
	idx = --wb->rc_nr_free;
	cell = &wb->rc_cells[idx];
	cell->sector = block;
	cell->cancelled = false;
	cell->failed = false;
	hlist_add_head(&cell->node, wb_rc_head(wb, block));
	wb_rc_cancel_sequential(wb, idx, thr);
	pb->cell = idx;
	return true;
}

/* End of a staged read, in any context: keep the data. */
void wb_rc_read_done(struct wb_device *wb, struct bio *bio,
		     struct wb_per_bio *pb, bool failed)
{
	void *dst = wb->rc_data + (size_t)pb->cell * WB_BLOCK_SIZE;
	struct bvec_iter iter;
	struct bio_vec bv;

	if (failed) {
		WRITE_ONCE(wb->rc_cells[pb->cell].failed, true);
	} else {
		/* bi_iter has advanced by now: walk the data as it was mapped. */
		__bio_for_each_segment(bv, bio, iter, pb->iter) {
			memcpy_from_bvec(dst, &bv);
			dst += bv.bv_len;
		}
	}
	/* Orders the copy before rc_work reads it. */
	if (atomic_dec_and_test(&wb->rc_pending))
		queue_work(wb->io_wq, &wb->rc_work);
}

/*
 * Puts one staged cell into the open segment as a clean block (dirty_bits 0
 * in the log), unless a write made it stale. Called with wb->lock held; may
 * drop it to wait for a segment (wb_get_cur), so everything that decides
 * whether the cell goes in is checked after the last wait, in the critical
 * section that adds its entry: a write of the block while wb_get_cur waited
 * has added its own entry (or cancelled the cell) by then. A dead or
 * suspended target injects nothing: the cells are dropped (an error is
 * returned).
 */
static int wb_rc_inject(struct wb_device *wb, struct wb_rc_cell *cell,
			const void *data)
{
	struct wb_metablock_device *md;
	struct wb_metablock *mb;
	struct wb_segment *seg;
	int err;

	for (;;) {
		if (test_bit(WB_F_SUSPENDED, &wb->flags))
			return -EBUSY;
		if (cell->cancelled || READ_ONCE(cell->failed))
			return 0;
		err = wb_get_cur(wb);
		if (err)
			return err;
		seg = wb->cur;
		if (seg->length < WB_BLOCKS_PER_SEGMENT)
			break;
		wb_seal(wb);
	}
	if (test_bit(WB_F_SUSPENDED, &wb->flags))
		return -EBUSY;
	if (cell->cancelled || READ_ONCE(cell->failed) ||
	    wb_ht_lookup(wb, cell->sector))
		return 0;
	mb = &seg->mb[seg->length];
	/* Under the lock, so that no later write of the block is overtaken. */
	memcpy(seg->buf + WB_BLOCK_SIZE * (1 + seg->length), data,
	       WB_BLOCK_SIZE);
	md = seg->buf + WB_METABLOCK_OFFSET(seg->length);
	md->sector = cpu_to_le64(cell->sector);
	md->dirty_bits = 0;
	wb_mb_set_sector(mb, cell->sector);
	mb->data_bits = WB_ALL_DIRTY;
	mb->dirty = false;
	mb->obsolete = false;
	mb->discarded = false;
	wb_ht_add(wb, mb);
	seg->length++;
	return 0;
}

static int wb_rc_key_cmp(const void *a, const void *b)
{
	const struct wb_rc_key *x = a, *y = b;

	if (x->sector != y->sector)
		return x->sector < y->sector ? -1 : 1;
	return 0;
}

/*
 * Every cell of the generation is used and its read ended: cancel the
 * sequential runs among them (in sector order, the reads may have come
 * interleaved), inject the rest, and start a new generation.
 */
void wb_rc_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device, rc_work);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]);
	u32 i, j, start = 0;

	for (i = 0; i < wb->rc_nr; i++)
		wb->rc_sorted[i] = (struct wb_rc_key) {
			.sector = wb->rc_cells[i].sector, .idx = i };
	sort(wb->rc_sorted, wb->rc_nr, sizeof(*wb->rc_sorted), wb_rc_key_cmp,
	     NULL);

	spin_lock(&wb->lock);
	for (i = 1; i <= wb->rc_nr; i++) {
		if (i < wb->rc_nr && wb->rc_sorted[i].sector ==
		    wb->rc_sorted[i - 1].sector + WB_BLOCK_SECTORS)
			continue;
		if (i - start > thr)
			for (j = start; j < i; j++)
				wb->rc_cells[wb->rc_sorted[j].idx].cancelled = true;
		start = i;
	}
	/* thr 0: read caching was switched off meanwhile, nothing is injected. */
	for (i = 0; thr && i < wb->rc_nr; i++) {
		if (wb_rc_inject(wb, &wb->rc_cells[i],
				 wb->rc_data + (size_t)i * WB_BLOCK_SIZE))
			break;
		/* A generation holds up to 2048 cells: one copy per hold. */
		spin_unlock(&wb->lock);
		cond_resched();
		spin_lock(&wb->lock);
	}
	for (i = 0; i < (1U << wb->rc_hash_bits); i++)
		INIT_HLIST_HEAD(&wb->rc_hash[i]);
	wb->rc_nr_free = wb->rc_nr;
	atomic_set(&wb->rc_pending, wb->rc_nr);
	spin_unlock(&wb->lock);
}
