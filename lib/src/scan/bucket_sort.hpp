// In-place sort of a large array by a 64-bit key, on several threads.
// Internal to the library (and its unit test).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace wbkit::detail {

constexpr std::size_t bucket_sort_buckets = 1024;
// Below this, std::sort alone is faster than a counting pass and a permutation.
constexpr std::size_t bucket_sort_min_elements = 1 << 14;

// Sorts [first, first + n) by less, given key(x) such that key(a) < key(b)
// implies less(a, b) (less refines the key order). Same result as std::sort
// when less is a strict total order. No memory beyond a few KiB: the
// elements are distributed into buckets by key range (a counting pass, then
// an in-place permutation), and each bucket is sorted on its own, buckets
// spread over up to `threads` threads. Large buckets are split again, so a
// skewed key set still sorts in small pieces; only a run of one key is left
// to std::sort whole.
template <typename T, typename Key, typename Less>
void bucket_sort(T* first, std::size_t n, Key key, Less less, unsigned threads)
{
	if (n < bucket_sort_min_elements) {
		std::sort(first, first + n, less);
		return;
	}
	std::uint64_t low = key(first[0]);
	std::uint64_t high = low;
	for (std::size_t i = 1; i < n; ++i) {
		const std::uint64_t k = key(first[i]);
		low = std::min(low, k);
		high = std::max(high, k);
	}
	if (low == high) {
		std::sort(first, first + n, less);
		return;
	}
	unsigned shift = 0;
	while (((high - low) >> shift) >= bucket_sort_buckets)
		++shift;
	auto bucket_of = [&](const T& x) { return std::size_t((key(x) - low) >> shift); };

	std::vector<std::size_t> begin(bucket_sort_buckets + 1, 0);
	for (std::size_t i = 0; i < n; ++i)
		++begin[bucket_of(first[i]) + 1];
	for (std::size_t b = 0; b < bucket_sort_buckets; ++b)
		begin[b + 1] += begin[b];
	// American flag sort: each element is moved straight to its bucket's next
	// free place, the element found there carried on the same way.
	std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
	for (std::size_t b = 0; b < bucket_sort_buckets; ++b) {
		while (next[b] < begin[b + 1]) {
			T carried = first[next[b]];
			std::size_t d = bucket_of(carried);
			while (d != b) {
				std::swap(carried, first[next[d]++]);
				d = bucket_of(carried);
			}
			first[next[b]++] = carried;
		}
	}

	std::atomic<std::size_t> next_bucket = 0;
	auto sort_buckets = [&] {
		for (std::size_t b; (b = next_bucket.fetch_add(1)) < bucket_sort_buckets;)
			bucket_sort(first + begin[b], begin[b + 1] - begin[b], key, less, 1);
	};
	std::vector<std::thread> helpers;
	for (unsigned t = 1; t < threads; ++t) {
		try {
			helpers.emplace_back(sort_buckets);
		} catch (const std::system_error&) {
			break; // no thread to be had: the others take its share
		}
	}
	sort_buckets();
	for (std::thread& t : helpers)
		t.join();
}

} // namespace wbkit::detail
