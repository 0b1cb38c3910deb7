// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-hash.c - the lookup of cached blocks: a hash table from backing
 * block to its newest copy on the cache device, and the dirty count.
 */
#include <linux/hash.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Hash table: backing block -> newest copy on the cache, dirty or clean */

static struct hlist_head *wb_ht_head(struct wb_device *wb, sector_t block)
{
	return &wb->htable[hash_64(block >> 3, wb->htable_bits)];
}

struct wb_metablock *wb_ht_lookup(struct wb_device *wb, sector_t block)
{
	struct wb_metablock *mb;

	hlist_for_each_entry(mb, wb_ht_head(wb, block), ht_node)
		if (mb->sector == block)
			return mb;
	return NULL;
}

void wb_ht_add(struct wb_device *wb, struct wb_metablock *mb)
{
	hlist_add_head(&mb->ht_node, wb_ht_head(wb, mb->sector));
	if (mb->dirty)
		wb->nr_dirty++;
}

void wb_ht_del(struct wb_device *wb, struct wb_metablock *mb)
{
	hlist_del_init(&mb->ht_node);
	if (mb->dirty)
		wb->nr_dirty--;
}

/* Takes the first n entries of seg out of the lookup. */
void wb_unhash_entries(struct wb_device *wb, struct wb_segment *seg,
		       unsigned int n)
{
	unsigned int j;

	for (j = 0; j < n; j++)
		if (!hlist_unhashed(&seg->mb[j].ht_node))
			wb_ht_del(wb, &seg->mb[j]);
}

/* Its data is on the backing device; a hashed copy keeps serving reads. */
void wb_mark_clean(struct wb_device *wb, struct wb_metablock *mb)
{
	if (mb->dirty && !hlist_unhashed(&mb->ht_node))
		wb->nr_dirty--;
	mb->dirty = false;
}
