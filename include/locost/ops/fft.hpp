// Real FFTs of a batch of equal-length signals (the bidirectional convolution's transforms).
//   rfft   in (howmany, n) real          -> out (howmany, n/2 + 1) complex
//   irfft  in (howmany, n/2 + 1) complex -> out (howmany, n) real, UNNORMALISED (scaled by n);
//          the input is overwritten (FFTW's c2r works in place on it).
// fast_fft_size(m) is the smallest n >= m of the form 2^a·3^b·5^c·7^d: sizes FFTW is fast at.
#pragma once
#include <complex>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct rfft_op {};
struct irfft_op {};

template <class Backend, class T>
void rfft(const T* in, std::complex<T>* out, index_t n, index_t howmany) {
    kernel<rfft_op, Backend, T>::run(in, out, n, howmany);
}

template <class Backend, class T>
void irfft(std::complex<T>* in, T* out, index_t n, index_t howmany) {
    kernel<irfft_op, Backend, T>::run(in, out, n, howmany);
}

inline index_t fast_fft_size(index_t m) {
    if (m <= 1) return 1;
    index_t best = index_t{1} << 62;
    for (index_t p2 = 1; p2 < best; p2 *= 2)
        for (index_t p3 = p2; p3 < best; p3 *= 3)
            for (index_t p5 = p3; p5 < best; p5 *= 5)
                for (index_t p7 = p5; p7 < best; p7 *= 7)
                    if (p7 >= m) {
                        best = p7;
                        break;
                    }
    return best;
}

}  // namespace locost::ops
