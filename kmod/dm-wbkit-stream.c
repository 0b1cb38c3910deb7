// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-stream.c - a writeback batch's writes to the backing device:
 * the blocks written ahead with it, and the dirty sectors streamed in
 * sector order from the cache device or the RAM buffers still kept.
 */
#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Writing ahead and streaming the batch */

/*
 * How close (in sectors, either side) a block of the window must lie to a
 * block of the batch to be written ahead: 1 MiB, about a track of a
 * hard disk, so the head that goes there for the batch's block finds it on
 * the way (one revolution at most) instead of a seek and half a revolution
 * of its own later.
 */
#define WB_AHEAD_SECTORS	BIT(11)

/*
 * Blocks written ahead with a batch of nr blocks: at most four times as
 * many. The slots the batch frees wait for the whole turn, ahead blocks
 * included; over a region a few times the cache nearly every block of the
 * window lies within WB_AHEAD_SECTORS of one of the batch, and without a
 * bound a one-segment batch took the window's 31 segments with it (about
 * 4,000 blocks, a two-second turn). With pacing (wb_pace_open) the longest
 * write was the same at nr and 4 * nr (166 and 169 ms on the modelled hard
 * disk, bench/vm-peers.sh), while scenario 78's share of dirty blocks
 * behind the batch fell from 84 % to 73 % (upstream: 95 %).
 */
#define WB_AHEAD_BUDGET(nr)	(4 * (nr))

/* Whether a batch entry (sorted by sector, nr of them) lies near sector. */
static bool wb_near_batch(const struct wb_writeback_entry *e, unsigned int nr,
			  sector_t sector)
{
	unsigned int lo = 0, hi = nr;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (e[mid].sector < sector)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < nr && e[lo].sector - sector <= WB_AHEAD_SECTORS) ||
	       (lo > 0 && sector - e[lo - 1].sector <= WB_AHEAD_SECTORS);
}

/*
 * Writing ahead. While writers wait for slots the batch is one segment
 * (wb_batch_size), whose blocks lie all over the backing device: the disk
 * pays a seek and a rotation for each. The segments behind it, up to
 * nr_max_batched_writeback in all, hold blocks on the same tracks; those
 * within WB_AHEAD_SECTORS of a batch block go with the batch, sorted into
 * it, and are marked clean after the same backing flush. Their segments are
 * released later, in log order, and cost less then: the slots still come
 * free one at a time, but each batch leaves the ones behind it emptier.
 *
 * Only durable segments (last_durable_id) are written ahead: after a power
 * cut replay finds each of them whole, and replays it over the backing
 * device (a newer copy of the same block from a later segment wins again).
 * Every dirty copy of a chosen block in the window goes into the list, so
 * that only the newest is written (wb_entry_cmp) and none is written back
 * later over it; the window is scanned in log order and the scan ends at
 * WB_AHEAD_BUDGET, so a newer copy is never chosen without the older ones.
 * The window holds at most WB_MAX_BATCH - n segments of
 * WB_BLOCKS_PER_SEGMENT blocks, so the entries fit wb->writeback_entries
 * beside the batch's. Appends to wb->writeback_entries after the batch's
 * nr (sorted) entries and returns how many it added. Called without
 * wb->lock.
 */
unsigned int wb_collect_ahead(struct wb_device *wb, u64 lw,
			      unsigned int n, unsigned int nr)
{
	struct wb_writeback_entry *entries = wb->writeback_entries;
	unsigned int window = min_t(unsigned int, WB_MAX_BATCH,
		READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]));
	unsigned int budget = WB_AHEAD_BUDGET(nr);
	unsigned int nr_ahead = 0, b, j;
	u64 last;

	if (!nr || n >= window)
		return 0;
	last = min_t(u64, lw + window, READ_ONCE(wb->last_durable_id));
	for (b = n; lw + 1 + b <= last && nr_ahead < budget; b++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + b);

		spin_lock(&wb->lock);
		if (seg->id != lw + 1 + b) {
			spin_unlock(&wb->lock);
			break;
		}
		for (j = 0; j < seg->length && nr_ahead < budget; j++) {
			struct wb_metablock *mb = &seg->mb[j];

			if (!mb->dirty || mb->obsolete || mb->discarded ||
			    !wb_near_batch(entries, nr, wb_mb_sector(mb)))
				continue;
			entries[nr + nr_ahead] = (struct wb_writeback_entry) {
				.sector = wb_mb_sector(mb),
				.batch_idx = b,
				.idx = j,
				.data_bits = mb->data_bits,
			};
			nr_ahead++;
		}
		spin_unlock(&wb->lock);
	}
	return nr_ahead;
}

/* The metablock of a batch entry; lw is the batch's last_writeback_id. */
struct wb_metablock *wb_entry_mb(struct wb_device *wb, u64 lw,
				 const struct wb_writeback_entry *e)
{
	return &wb_seg_of_id(wb, lw + 1 + e->batch_idx)->mb[e->idx];
}

/* Submits the dirty sectors of one block as runs of contiguous sectors. */
static void wb_submit_runs(struct wb_device *wb, struct wb_aio *aio,
			   blk_opf_t opf, struct wb_writeback_entry *e,
			   void *data)
{
	unsigned int i, j;

	for (i = 0; wb_next_run(e->data_bits, &i, &j); i = j)
		wb_aio_submit(wb, aio, WB_DEV_BACKING, opf,
			      e->sector + i, data + (i << WB_SECTOR_SHIFT),
			      (j - i) << WB_SECTOR_SHIFT);
}

/*
 * Whether the batch writes entry i of the nr sorted ones: a newer copy of
 * the block in the batch holds a superset of its dirty sectors (writes
 * merge older dirty sectors; replay wrote the others to the backing
 * device), and the whole batch is marked clean at once: only the newest
 * is written.
 */
static bool wb_entry_written(struct wb_device *wb, unsigned int i,
			     unsigned int nr)
{
	return i + 1 == nr || wb->writeback_entries[i + 1].sector !=
			      wb->writeback_entries[i].sector;
}

/*
 * Fills one chunk of wb->stream with the data of the next entries the
 * batch writes, from entry *i on: a block whose segment kept its RAM
 * buffer is copied from it (4 KiB under the lock, as a merge), the others
 * are read from the cache device. The segments cannot change: they are
 * durable and not written back. Returns how many blocks it holds (0 at
 * the end of the batch) and moves *i past them; on a read error the
 * device is dead or, for a transient one, *i is left as it was.
 */
static unsigned int wb_stream_fill(struct wb_device *wb, u64 lw,
				   unsigned int *i, unsigned int nr,
				   void *chunk, int *err)
{
	DECLARE_BITMAP(from_dev, WB_STREAM_CHUNK_BLOCKS);
	struct blk_plug plug;
	struct wb_aio aio;
	unsigned int k, e, b;

	do {
		bitmap_zero(from_dev, WB_STREAM_CHUNK_BLOCKS);
		wb_aio_init(&aio);
		blk_start_plug(&plug);
		for (k = 0, e = *i; e < nr && k < WB_STREAM_CHUNK_BLOCKS; e++) {
			struct wb_writeback_entry *we = &wb->writeback_entries[e];
			struct wb_segment *seg =
				wb_seg_of_id(wb, lw + 1 + we->batch_idx);
			void *dst = chunk + k * WB_BLOCK_SIZE;

			if (!wb_entry_written(wb, e, nr))
				continue;
			spin_lock(&wb->lock);
			if (seg->buf) {
				memcpy(dst, seg->buf + WB_BLOCK_SIZE * (1 + we->idx),
				       WB_BLOCK_SIZE);
				spin_unlock(&wb->lock);
			} else {
				spin_unlock(&wb->lock);
				__set_bit(k, from_dev);
				wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_READ,
					      wb_mb_cache_sector(wb, &seg->mb[we->idx]),
					      dst, WB_BLOCK_SIZE);
			}
			k++;
		}
		blk_finish_plug(&plug);
		*err = wb_aio_wait(&aio);
	} while (wb_retry_transient(wb, *err));
	if (*err) {
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_READ, aio.err_sector, *err);
		return 0;
	}
	for_each_set_bit(b, from_dev, k)
		invalidate_kernel_vmap_range(chunk + b * WB_BLOCK_SIZE,
					     WB_BLOCK_SIZE);
	*i = e;
	return k;
}

/*
 * Writes the batch's nr sorted entries to the backing device, the newest
 * copy of each block (wb_entry_written), through wb->stream: the batch's
 * memory is the stream's 2 MiB whatever its size (its segments read whole
 * would take 512 KiB each, 16 MiB for a batch of 32). Chunk after chunk
 * is filled (wb_stream_fill) and its writes submitted plugged, so that
 * adjacent blocks merge into larger requests (the point of sorting); a chunk is
 * refilled once its writes ended, so WB_STREAM_CHUNKS - 1 chunks of
 * writes are in flight while the next one is read, and the backing device
 * sees the batch's writes in sector order without a gap. Returns 0 or the
 * first error: a cache device read error has killed the target, a backing
 * write error is the caller's.
 */
int wb_stream_writeback(struct wb_device *wb, u64 lw, unsigned int nr,
			blk_opf_t write_opf, sector_t *err_sector)
{
	struct wb_aio writes[WB_STREAM_CHUNKS];
	bool busy[WB_STREAM_CHUNKS] = { };
	unsigned int i = 0, c, k, e, filled;
	struct blk_plug plug;
	int err = 0, werr;

	for (c = 0; i < nr; c = (c + 1) % WB_STREAM_CHUNKS) {
		void *chunk = wb->stream + c * WB_STREAM_CHUNK_BLOCKS * WB_BLOCK_SIZE;
		unsigned int first = i;

		if (busy[c]) {
			busy[c] = false;
			err = wb_aio_wait(&writes[c]);
			if (err) {
				*err_sector = writes[c].err_sector;
				break;
			}
		}
		filled = wb_stream_fill(wb, lw, &i, nr, chunk, &err);
		if (err)
			break;
		wb_aio_init(&writes[c]);
		busy[c] = true;
		blk_start_plug(&plug);
		for (k = 0, e = first; k < filled; e++) {
			if (!wb_entry_written(wb, e, nr))
				continue;
			wb_submit_runs(wb, &writes[c], write_opf,
				       &wb->writeback_entries[e],
				       chunk + k * WB_BLOCK_SIZE);
			k++;
		}
		blk_finish_plug(&plug);
	}
	/* The stream is reused by the next batch: every write must end. */
	for (c = 0; c < WB_STREAM_CHUNKS; c++) {
		if (!busy[c])
			continue;
		werr = wb_aio_wait(&writes[c]);
		if (werr && !err) {
			err = werr;
			*err_sector = writes[c].err_sector;
		}
	}
	return err;
}
