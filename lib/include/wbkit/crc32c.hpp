// CRC-32C (Castagnoli, CRC-32/ISCSI): the segment checksum.
//
// The hot path uses Intel's ISA-L, which folds the buffer with carry-less
// multiplication when the CPU has it (several GB/s per core). Crypto++'s
// implementation is kept as the reference: the unit tests hold every engine
// against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace wbkit {

enum class Crc32cEngine {
	fast,      // ISA-L, dispatched at run time to the best code for this CPU
	portable,  // ISA-L's table-driven baseline (any x86-64)
	reference, // Crypto++
};

class Crc32c {
public:
	explicit Crc32c(Crc32cEngine engine = Crc32cEngine::fast);
	~Crc32c();
	Crc32c(const Crc32c&) = delete;
	Crc32c& operator=(const Crc32c&) = delete;

	void update(std::span<const std::byte> data);
	// The CRC-32/ISCSI value of everything updated so far; resets the state.
	std::uint32_t finish();

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
};

std::uint32_t crc32c(std::span<const std::byte> data, Crc32cEngine engine = Crc32cEngine::fast);

} // namespace wbkit
