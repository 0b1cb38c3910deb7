// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * wbhammer - many threads on the same few 4 KiB blocks at once, to drive a
 * write-back cache through the paths where a write waits for another
 * thread with its lock dropped: concurrent writes into the same block of
 * the open segment, reads that wait for a copy into that block, and writes
 * that wait for those reads, while another thread keeps sealing the open
 * segment (RWF_DSYNC writes, which reach the target as FUA).
 *
 *   wbhammer run   DEV --state FILE [--seconds S] [--writers W] [--readers R]
 *   wbhammer check DEV --state FILE
 *
 * Blocks 0..HOT-1 are hammered by every writer and reader; blocks from
 * COLD_FIRST on take the sealer's writes, each a new block. Every sector
 * written carries a stamp (magic, block, writer, sequence number), so a
 * read tells whose write it came from and whether it is in its place.
 * Online: every read of a hot block must hold stamps of this block (or the
 * initial zeros) in each sector. After the storm (all threads joined, one
 * fsync): each hot block must hold, in all 8 sectors, one write that no
 * other write to the block followed (a write that completed before another
 * started is superseded), and each sealer write must read back as written.
 * `run` saves what it read; `check` (after a remove and create, that is a
 * replay of the log) must read the same.
 *
 * Built static (the guest has no libc of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096u
#define SECTOR 512u
#define HOT 4u
#define COLD_FIRST 64u
#define MAX_WRITERS 8u
#define MAX_READERS 8u
#define MAGIC 0x52454d4d41484257ULL /* "WBHAMMER" */
#define SEALER_WRITER 0xffffu

struct stamp {
	uint64_t magic;
	uint64_t block;
	uint64_t writer;
	uint64_t seq;
};

/* A writer's last completed write to a block, with global tickets taken
 * before it was issued and after it completed. */
struct last_write {
	uint64_t seq, start, end;
};

static atomic_uint_fast64_t ticket = 1;
static atomic_bool stop;
static atomic_uint_fast64_t nr_bad_reads, nr_reads, nr_writes, nr_seals;
static struct last_write last[MAX_WRITERS][HOT];
static int fd;
static uint64_t cold_blocks;

static void fill(void *buf, uint64_t block, uint64_t writer, uint64_t seq)
{
	for (unsigned s = 0; s < BLOCK / SECTOR; s++) {
		struct stamp *st = (struct stamp *)((char *)buf + s * SECTOR);

		memset((char *)buf + s * SECTOR, (int)(seq & 0xff), SECTOR);
		*st = (struct stamp){ MAGIC, block, writer, seq };
	}
}

static bool zero_sector(const char *p)
{
	for (unsigned i = 0; i < SECTOR; i++)
		if (p[i])
			return false;
	return true;
}

/* Each sector: the initial zeros, or a stamp of this block. */
static bool plausible(const void *buf, uint64_t block)
{
	for (unsigned s = 0; s < BLOCK / SECTOR; s++) {
		const char *p = (const char *)buf + s * SECTOR;
		const struct stamp *st = (const struct stamp *)p;

		if (zero_sector(p))
			continue;
		if (st->magic != MAGIC || st->block != block)
			return false;
	}
	return true;
}

static uint64_t rnd(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static void *alloc_block(void)
{
	void *p;

	if (posix_memalign(&p, BLOCK, BLOCK)) {
		perror("posix_memalign");
		exit(3);
	}
	return p;
}

static void io_fail(const char *what, uint64_t block)
{
	fprintf(stderr, "wbhammer: %s of block %" PRIu64 " failed: %s\n", what, block, strerror(errno));
	exit(1);
}

static void *writer_main(void *arg)
{
	uint64_t w = (uintptr_t)arg, state = 0x9e3779b97f4a7c15ULL * (w + 1), seq = 0;
	void *buf = alloc_block();

	while (!atomic_load(&stop)) {
		uint64_t block = rnd(&state) % HOT, start, end;

		fill(buf, block, w, ++seq);
		start = atomic_fetch_add(&ticket, 1);
		if (pwrite(fd, buf, BLOCK, (off_t)(block * BLOCK)) != BLOCK)
			io_fail("write", block);
		end = atomic_fetch_add(&ticket, 1);
		last[w][block] = (struct last_write){ seq, start, end };
		atomic_fetch_add(&nr_writes, 1);
	}
	free(buf);
	return NULL;
}

static void *reader_main(void *arg)
{
	uint64_t state = 0xda942042e4dd58b5ULL * ((uintptr_t)arg + 1);
	void *buf = alloc_block();

	while (!atomic_load(&stop)) {
		uint64_t block = rnd(&state) % HOT;

		if (pread(fd, buf, BLOCK, (off_t)(block * BLOCK)) != BLOCK)
			io_fail("read", block);
		atomic_fetch_add(&nr_reads, 1);
		if (!plausible(buf, block)) {
			const struct stamp *st = buf;

			if (atomic_fetch_add(&nr_bad_reads, 1) < 10)
				printf("bad read: block %" PRIu64 " holds a stamp of block %" PRIu64
				       " (writer %" PRIu64 ", write %" PRIu64 ", magic %s)\n",
				       block, st->block, st->writer, st->seq, st->magic == MAGIC ? "ok" : "wrong");
		}
	}
	free(buf);
	return NULL;
}

/* Each RWF_DSYNC write commits, and so seals, the open segment. */
static void *sealer_main(void *arg)
{
	void *buf = alloc_block();
	uint64_t n = 0;

	(void)arg;
	while (!atomic_load(&stop) && n < cold_blocks) {
		uint64_t block = COLD_FIRST + n;
		struct iovec iov = { buf, BLOCK };

		fill(buf, block, SEALER_WRITER, n + 1);
		if (pwritev2(fd, &iov, 1, (off_t)(block * BLOCK), RWF_DSYNC) != BLOCK)
			io_fail("dsync write", block);
		n++;
		atomic_store(&nr_seals, n);
	}
	free(buf);
	return NULL;
}

/* O_DIRECT reads need aligned buffers. */
static char *alloc_blocks(uint64_t n)
{
	void *p;

	if (posix_memalign(&p, BLOCK, n * BLOCK)) {
		perror("posix_memalign");
		exit(3);
	}
	return p;
}

static int open_device(const char *dev)
{
	int f = open(dev, O_RDWR | O_DIRECT);

	if (f < 0) {
		fprintf(stderr, "wbhammer: cannot open %s: %s\n", dev, strerror(errno));
		exit(3);
	}
	return f;
}

/* The hot blocks' and the sealer's blocks' content, as the state file keeps it. */
static void read_all(uint64_t sealed, char *out)
{
	for (uint64_t b = 0; b < HOT; b++)
		if (pread(fd, out + b * BLOCK, BLOCK, (off_t)(b * BLOCK)) != BLOCK)
			io_fail("read", b);
	for (uint64_t n = 0; n < sealed; n++)
		if (pread(fd, out + (HOT + n) * BLOCK, BLOCK, (off_t)((COLD_FIRST + n) * BLOCK)) != BLOCK)
			io_fail("read", COLD_FIRST + n);
}

static int check_after_storm(const char *image, unsigned writers, uint64_t sealed)
{
	int bad = 0;
	void *want = alloc_block();

	for (uint64_t b = 0; b < HOT; b++) {
		const char *got = image + b * BLOCK;
		const struct stamp *st = (const struct stamp *)got;
		uint64_t latest_start = 0;
		bool whole = true;

		for (unsigned s = 1; s < BLOCK / SECTOR; s++)
			whole &= !memcmp(got, got + s * SECTOR, sizeof(*st));
		for (unsigned w = 0; w < writers; w++)
			if (last[w][b].seq && last[w][b].start > latest_start)
				latest_start = last[w][b].start;
		if (!latest_start) {
			if (!zero_sector(got)) {
				printf("block %" PRIu64 ": nobody wrote it, yet it holds data\n", b);
				bad++;
			}
			continue;
		}
		/* Writes that overlapped the latest last write can each be current,
		 * and two copies into one block at once may leave a mix of them. */
		unsigned candidates = 0;

		for (unsigned w = 0; w < writers; w++)
			candidates += last[w][b].seq && last[w][b].end >= latest_start;
		if (candidates > 1) {
			if (!plausible(got, b) || zero_sector(got)) {
				printf("block %" PRIu64 ": holds data of another block or none\n", b);
				bad++;
			}
			continue;
		}
		if (!whole || st->magic != MAGIC || st->block != b || st->writer >= writers) {
			printf("block %" PRIu64 ": not one whole write of its own (writer %" PRIu64 ", write %" PRIu64
			       ")\n", b, st->writer, st->seq);
			bad++;
			continue;
		}
		/* Only a writer's last write can be current, and only if it ended
		 * after the latest last write started. */
		if (st->seq != last[st->writer][b].seq || last[st->writer][b].end < latest_start) {
			printf("block %" PRIu64 ": holds writer %" PRIu64 "'s write %" PRIu64
			       ", superseded (that writer's last was %" PRIu64 ")\n",
			       b, st->writer, st->seq, last[st->writer][b].seq);
			bad++;
			continue;
		}
		fill(want, b, st->writer, st->seq);
		if (memcmp(got, want, BLOCK)) {
			printf("block %" PRIu64 ": write %" PRIu64 "'s data is damaged\n", b, st->seq);
			bad++;
		}
	}
	for (uint64_t n = 0; n < sealed; n++) {
		fill(want, COLD_FIRST + n, SEALER_WRITER, n + 1);
		if (memcmp(image + (HOT + n) * BLOCK, want, BLOCK)) {
			if (bad < 20)
				printf("block %" PRIu64 ": the dsync write is not there\n", COLD_FIRST + n);
			bad++;
		}
	}
	free(want);
	return bad;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: wbhammer run   DEV --state FILE [--seconds S] [--writers W] [--readers R]\n"
		     "       wbhammer check DEV --state FILE\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "state", required_argument, NULL, 'f' },   { "seconds", required_argument, NULL, 's' },
		{ "writers", required_argument, NULL, 'w' }, { "readers", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },	      { NULL, 0, NULL, 0 },
	};
	unsigned seconds = 20, writers = 4, readers = 2;
	const char *state_path = NULL;
	pthread_t wt[MAX_WRITERS], rt[MAX_READERS], st;
	uint64_t sealed, dev_bytes;
	char *image;
	FILE *f;
	int c, bad;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': state_path = optarg; break;
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'w': writers = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'r': readers = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2 || !state_path || !writers || writers > MAX_WRITERS || readers > MAX_READERS) {
		usage(stderr);
		return 2;
	}
	fd = open_device(argv[optind + 1]);
	dev_bytes = (uint64_t)lseek(fd, 0, SEEK_END);
	if (dev_bytes < (COLD_FIRST + 1) * BLOCK) {
		fprintf(stderr, "wbhammer: device too small\n");
		return 2;
	}
	cold_blocks = dev_bytes / BLOCK - COLD_FIRST;

	if (!strcmp(argv[optind], "check")) {
		char *saved;
		long size;

		f = fopen(state_path, "rb");
		if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < (long)(HOT * BLOCK) || size % BLOCK) {
			fprintf(stderr, "wbhammer: cannot read the state %s\n", state_path);
			return 3;
		}
		rewind(f);
		saved = alloc_blocks((uint64_t)size / BLOCK);
		image = alloc_blocks((uint64_t)size / BLOCK);
		if (fread(saved, 1, (size_t)size, f) != (size_t)size) {
			fprintf(stderr, "wbhammer: cannot read the state %s\n", state_path);
			return 3;
		}
		fclose(f);
		sealed = (uint64_t)size / BLOCK - HOT;
		read_all(sealed, image);
		bad = 0;
		for (uint64_t b = 0; b < HOT + sealed; b++)
			if (memcmp(saved + b * BLOCK, image + b * BLOCK, BLOCK)) {
				if (bad < 10)
					printf("block %" PRIu64 " changed across the restart\n",
					       b < HOT ? b : COLD_FIRST + b - HOT);
				bad++;
			}
		printf("check: %" PRIu64 " blocks, %d changed\n", HOT + sealed, bad);
		return bad ? 1 : 0;
	}
	if (strcmp(argv[optind], "run")) {
		usage(stderr);
		return 2;
	}

	for (uintptr_t i = 0; i < writers; i++)
		if (pthread_create(&wt[i], NULL, writer_main, (void *)i))
			return 3;
	for (uintptr_t i = 0; i < readers; i++)
		if (pthread_create(&rt[i], NULL, reader_main, (void *)i))
			return 3;
	if (pthread_create(&st, NULL, sealer_main, NULL))
		return 3;
	sleep(seconds);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < writers; i++)
		pthread_join(wt[i], NULL);
	for (unsigned i = 0; i < readers; i++)
		pthread_join(rt[i], NULL);
	pthread_join(st, NULL);
	if (fsync(fd))
		io_fail("fsync", 0);

	sealed = atomic_load(&nr_seals);
	image = alloc_blocks(HOT + sealed);
	read_all(sealed, image);
	bad = check_after_storm(image, writers, sealed);
	f = fopen(state_path, "wb");
	if (!f || fwrite(image, 1, (HOT + sealed) * BLOCK, f) != (HOT + sealed) * BLOCK || fclose(f)) {
		fprintf(stderr, "wbhammer: cannot write the state %s\n", state_path);
		return 3;
	}
	printf("run: %" PRIu64 " writes, %" PRIu64 " reads (%" PRIu64 " bad), %" PRIu64 " dsync writes; %d blocks wrong\n",
	       (uint64_t)atomic_load(&nr_writes), (uint64_t)atomic_load(&nr_reads),
	       (uint64_t)atomic_load(&nr_bad_reads), sealed, bad);
	return bad || atomic_load(&nr_bad_reads) ? 1 : 0;
}
