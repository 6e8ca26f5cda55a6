"""Oracle cases for ember.fft (the fft_c2c / fft_r2c / fft_c2r ops): values and gradients against torch,
including rfft/irfft's one-sided conventions, every norm and trimmed / zero-padded signal lengths."""
from oracle import Case

C = ("complex64", "complex128")
R = ("float32", "float64")


def _f(name, **kw):
    return lambda m, x: getattr(m.fft, name)(x, **kw)


CASES = [
    Case("fft_c2c", _f("fft"), dtypes=C, shapes=((3, 8),)),
    Case("fft_real_input", _f("fft", n=6, norm="ortho"), dtypes=R, shapes=((3, 8),)),
    Case("ifft_c2c", _f("ifft", dim=0, norm="forward"), dtypes=C, shapes=((5, 4),)),
    Case("fft2_padded", _f("fft2", s=(4, 10)), dtypes=C, shapes=((2, 3, 8),), layouts=("contig",)),
    Case("fftn_dims", _f("ifftn", dim=(0, 2), norm="ortho"), dtypes=C, shapes=((2, 3, 6),), layouts=("contig",)),
    Case("rfft_r2c", _f("rfft"), dtypes=R, shapes=((3, 8),)),
    Case("rfft_odd_trim", _f("rfft", n=7, dim=0, norm="forward"), dtypes=R, shapes=((9, 4),)),
    Case("rfftn_r2c", _f("rfftn", norm="ortho"), dtypes=R, shapes=((2, 3, 5),), layouts=("contig",)),
    Case("irfft_c2r", _f("irfft"), dtypes=C, shapes=((3, 5),)),
    Case("irfft_odd_n", _f("irfft", n=9, norm="ortho"), dtypes=C, shapes=((3, 5),)),
    Case("irfft2_c2r", _f("irfft2", s=(4, 7), norm="forward"), dtypes=C, shapes=((2, 3, 5),), layouts=("contig",)),
    Case("hfft", _f("hfft", n=8), dtypes=C, shapes=((3, 5),)),
    Case("ihfft", _f("ihfft", norm="ortho"), dtypes=R, shapes=((3, 8),)),
    Case("fftshift", _f("fftshift", dim=(0, 1)), dtypes=C + R, shapes=((3, 5),)),
    Case("ifftshift", _f("ifftshift"), dtypes=C + R, shapes=((4, 5),)),
]
