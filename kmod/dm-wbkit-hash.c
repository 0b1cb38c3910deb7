// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-hash.c - the lookup of cached blocks: a hash table from backing
 * block to its newest copy on the cache device, and the dirty count.
 */
#include <linux/hash.h>
#include <linux/kernel.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Hash table: backing block -> newest copy on the cache, dirty or clean */

/*
 * Any number of buckets, not a power of two, so that the table's cost per
 * cache block is what wb_alloc_metadata chooses (WB_MEM_BUCKETS_NUM / _DEN).
 */
static u32 *wb_ht_head(struct wb_device *wb, sector_t block)
{
	return &wb->htable[reciprocal_scale(hash_64(block >> 3, 32),
					    wb->ht_buckets)];
}

static u32 wb_mb_link(struct wb_device *wb, struct wb_metablock *mb)
{
	return (u32)wb_mb_index(wb, mb) + 1;
}

struct wb_metablock *wb_ht_lookup(struct wb_device *wb, sector_t block)
{
	u32 link = *wb_ht_head(wb, block);

	while (link && link != WB_HT_END) {
		struct wb_metablock *mb = &wb->mbs[link - 1];

		if (wb_mb_sector(mb) == block)
			return mb;
		link = mb->ht_next;
	}
	return NULL;
}

void wb_ht_add(struct wb_device *wb, struct wb_metablock *mb)
{
	u32 *head = wb_ht_head(wb, wb_mb_sector(mb));

	mb->ht_next = *head ?: WB_HT_END;
	*head = wb_mb_link(wb, mb);
	if (mb->dirty)
		wb->nr_dirty++;
}

/* Chains average at most 1.33 entries (wb_alloc_metadata): a short walk. */
void wb_ht_del(struct wb_device *wb, struct wb_metablock *mb)
{
	u32 *link = wb_ht_head(wb, wb_mb_sector(mb));
	u32 self = wb_mb_link(wb, mb);

	while (*link != self) {
		if (WARN_ON_ONCE(!*link || *link == WB_HT_END))
			return;
		link = &wb->mbs[*link - 1].ht_next;
	}
	*link = mb->ht_next;	/* a head may hold WB_HT_END: empty too */
	mb->ht_next = 0;
	if (mb->dirty)
		wb->nr_dirty--;
}

/* Takes the first n entries of seg out of the lookup. */
void wb_unhash_entries(struct wb_device *wb, struct wb_segment *seg,
		       unsigned int n)
{
	unsigned int j;

	for (j = 0; j < n; j++)
		if (wb_mb_hashed(&seg->mb[j]))
			wb_ht_del(wb, &seg->mb[j]);
}

/* Its data is on the backing device; a hashed copy keeps serving reads. */
void wb_mark_clean(struct wb_device *wb, struct wb_metablock *mb)
{
	if (mb->dirty && wb_mb_hashed(mb))
		wb->nr_dirty--;
	mb->dirty = false;
}
