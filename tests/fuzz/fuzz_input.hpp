// The fuzzers' view of their input: read front to back; past its end every
// value is zero, so a short input still describes a whole case.
#pragma once

#include <cstddef>
#include <cstdint>

class Input {
public:
	Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
	std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
	std::uint64_t u64()
	{
		std::uint64_t v = 0;
		for (int i = 0; i < 8; ++i)
			v |= std::uint64_t(u8()) << (8 * i);
		return v;
	}

private:
	const std::uint8_t* data_;
	std::size_t size_;
	std::size_t pos_ = 0;
};
