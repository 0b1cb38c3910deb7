// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-devio.c - the target's own I/O to its devices: synchronous
 * and asynchronous reads and writes and device flushes, with transient
 * errors retried and any other error killing the target (the dead state,
 * dm-wbkit-core.c).
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* I/O helpers. Buffers are kmalloc'ed, page or vmalloc memory. */

static struct page *wb_buf_page(void *p)
{
	return is_vmalloc_addr(p) ? vmalloc_to_page(p) : virt_to_page(p);
}

static struct bio *wb_build_bio(struct wb_device *wb, enum wb_dev_kind dev,
				blk_opf_t opf, sector_t sector, void *buf,
				unsigned int len)
{
	unsigned int nr = DIV_ROUND_UP(offset_in_page(buf) + len, PAGE_SIZE);
	struct bio *bio;

	/* The target's own pool: no competition with file systems above. */
	bio = bio_alloc_bioset(wb_bdev(wb, dev), len ? nr : 0, opf, GFP_NOIO,
			       &wb->bio_set);
	bio->bi_iter.bi_sector = sector;
	container_of(bio, struct wb_bio, bio)->sector = sector;
	while (len) {
		unsigned int off = offset_in_page(buf);
		unsigned int chunk = min_t(unsigned int, len, PAGE_SIZE - off);

		/* Cannot fail: the bio has a vector per page. */
		__bio_add_page(bio, wb_buf_page(buf), chunk, off);
		buf += chunk;
		len -= chunk;
	}
	return bio;
}

static enum wb_op wb_opf_op(blk_opf_t opf)
{
	return op_is_write(opf) ? WB_OP_WRITE : WB_OP_READ;
}

/*
 * Synchronous I/O that leaves the verdict on an error to the caller (it
 * counts it): a read for one bio, whose failure fails that bio alone.
 * Transient errors are waited out and retried. Nothing is issued once the
 * target is dead.
 */
int wb_sync_io_nofail(struct wb_device *wb, enum wb_dev_kind dev,
		      blk_opf_t opf, sector_t sector, void *buf,
		      unsigned int len)
{
	bool vm = is_vmalloc_addr(buf);
	struct bio *bio;
	int err;

	for (;;) {
		if (wb_dead(wb))
			return -EIO;
		if (vm && op_is_write(opf))
			flush_kernel_vmap_range(buf, len);
		bio = wb_build_bio(wb, dev, opf, sector, buf, len);
		err = submit_bio_wait(bio);
		bio_put(bio);
		if (!wb_retry_transient(wb, err))
			break;
	}
	if (!err && vm && !op_is_write(opf))
		invalidate_kernel_vmap_range(buf, len);
	return err;
}

/* The same for the target's own I/O: any error but a transient one kills. */
int wb_sync_io(struct wb_device *wb, enum wb_dev_kind dev, blk_opf_t opf,
	       sector_t sector, void *buf, unsigned int len)
{
	int err = wb_sync_io_nofail(wb, dev, opf, sector, buf, len);

	if (err && !wb_dead(wb))
		wb_set_dead(wb, dev, wb_opf_op(opf), sector, err);
	return err;
}

int wb_flush_dev(struct wb_device *wb, enum wb_dev_kind dev)
{
	int err;

	for (;;) {
		if (wb_dead(wb))
			return -EIO;
		err = blkdev_issue_flush(wb_bdev(wb, dev));
		if (!wb_retry_transient(wb, err))
			break;
	}
	if (err)
		wb_set_dead(wb, dev, WB_OP_FLUSH, 0, err);
	return err;
}

/* Asynchronous I/O: submit any number, then wait for all. */
void wb_aio_init(struct wb_aio *aio)
{
	atomic_set(&aio->pending, 1);
	aio->err = 0;
	aio->err_sector = 0;
	init_completion(&aio->done);
}

static void wb_aio_put(struct wb_aio *aio)
{
	if (atomic_dec_and_test(&aio->pending))
		complete(&aio->done);
}

static void wb_aio_endio(struct bio *bio)
{
	struct wb_aio *aio = bio->bi_private;

	/* bi_iter has advanced by now: the start sector was kept aside. */
	if (bio->bi_status &&
	    cmpxchg(&aio->err, 0, blk_status_to_errno(bio->bi_status)) == 0)
		aio->err_sector = container_of(bio, struct wb_bio, bio)->sector;
	bio_put(bio);
	wb_aio_put(aio);
}

void wb_aio_submit(struct wb_device *wb, struct wb_aio *aio,
		   enum wb_dev_kind dev, blk_opf_t opf, sector_t sector,
		   void *buf, unsigned int len)
{
	struct bio *bio;

	if (wb_dead(wb)) {
		cmpxchg(&aio->err, 0, -EIO);
		return;
	}
	if (is_vmalloc_addr(buf) && op_is_write(opf))
		flush_kernel_vmap_range(buf, len);
	bio = wb_build_bio(wb, dev, opf, sector, buf, len);
	bio->bi_private = aio;
	bio->bi_end_io = wb_aio_endio;
	atomic_inc(&aio->pending);
	submit_bio(bio);
}

int wb_aio_wait(struct wb_aio *aio)
{
	struct wb_wait_clock clock = { jiffies, false };

	wb_aio_put(aio);
	/* Woken every slice for the hung-task detector, see wb_wait_io. */
	while (!wait_for_completion_io_timeout(&aio->done, WB_WAIT_SLICE))
		wb_wait_slow(&clock, __func__, __LINE__);
	return aio->err;
}
