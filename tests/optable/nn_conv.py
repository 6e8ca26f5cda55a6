"""nn.functional linear / convolution / pooling / padding / interpolation ops against torch.

Every op these families register is exercised here: ``linear``, ``conv2d`` with its derivative family
(``conv_transpose2d``, ``conv2d_weight``), ``im2col``/``col2im``, ``max_pool2d`` with
``max_pool_scatter``, ``avg_pool2d`` with ``avg_pool2d_backward``, ``adaptive_max_pool2d`` and
``constant_pad_nd``. ``*_dd`` cases multiply by a second input so that the double-backward pass runs the
derivatives of the backward ops as well.
"""
from oracle import Case

F64 = ("float64",)


def F(m):
    return m.nn.functional


CASES = [
    # ---- linear / bilinear --------------------------------------------------------------------------
    Case("nn_linear", lambda m, x, w, b: F(m).linear(x, w, b), shapes=((5, 3), (4, 3), (4,)),
         double_backward=True),
    Case("nn_linear_nd", lambda m, x, w, b: F(m).linear(x, w, b), shapes=((2, 3, 5), (4, 5), (4,)),
         double_backward=True),
    Case("nn_linear_1d_nobias", lambda m, x, w: F(m).linear(x, w), shapes=((3,), (4, 3))),
    Case("nn_linear_scalar_bias", lambda m, x, w, b: F(m).linear(x, w, b), shapes=((5, 3), (4, 3), ())),
    Case("nn_bilinear", lambda m, a, b, w, c: F(m).bilinear(a, b, w, c), shapes=((5, 3), (5, 2), (4, 3, 2), (4,))),
    Case("nn_bilinear_nd", lambda m, a, b, w: F(m).bilinear(a, b, w), shapes=((2, 5, 3), (2, 5, 2), (4, 3, 2))),
    # ---- convolution --------------------------------------------------------------------------------
    Case("nn_conv2d", lambda m, x, w, b: F(m).conv2d(x, w, b), shapes=((2, 3, 7, 6), (4, 3, 3, 2), (4,)),
         double_backward=True),
    Case("nn_conv2d_geometry", lambda m, x, w, b: F(m).conv2d(x, w, b, stride=2, padding=(1, 2), dilation=(2, 1),
                                                              groups=2),
         shapes=((2, 4, 9, 8), (6, 2, 3, 3), (6,)), double_backward=True),
    Case("nn_conv2d_same", lambda m, x, w: F(m).conv2d(x, w, padding="same", dilation=(1, 2)),
         shapes=((2, 3, 7, 6), (4, 3, 4, 3))),
    Case("nn_conv2d_valid_unbatched", lambda m, x, w: F(m).conv2d(x, w, padding="valid", stride=(1, 3)),
         shapes=((3, 6, 7), (2, 3, 3, 3))),
    Case("nn_conv2d_depthwise", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=1, groups=4),
         shapes=((2, 4, 5, 5), (8, 1, 3, 3), (8,))),
    Case("nn_conv2d_1x1", lambda m, x, w: F(m).conv2d(x, w), shapes=((2, 5, 4, 3), (3, 5, 1, 1))),
    Case("nn_conv1d", lambda m, x, w, b: F(m).conv1d(x, w, b, stride=3, padding=2), shapes=((2, 3, 10), (4, 3, 3), (4,)),
         double_backward=True),
    Case("nn_conv1d_same_groups", lambda m, x, w: F(m).conv1d(x, w, padding="same", dilation=2, groups=3),
         shapes=((2, 3, 9), (6, 1, 4))),
    Case("nn_conv_transpose2d", lambda m, x, w, b: F(m).conv_transpose2d(x, w, b, stride=2, padding=1,
                                                                       output_padding=1, groups=2, dilation=(1, 2)),
         shapes=((2, 4, 5, 4), (4, 3, 3, 2), (6,)), double_backward=True),
    Case("nn_conv_transpose2d_plain", lambda m, x, w: F(m).conv_transpose2d(x, w), shapes=((2, 3, 4, 4), (3, 2, 3, 3))),
    Case("nn_conv_transpose1d", lambda m, x, w, b: F(m).conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
         shapes=((2, 4, 5), (4, 3, 3), (3,)), double_backward=True),
    Case("nn_unfold", lambda m, x: F(m).unfold(x, (2, 3), padding=1, stride=2, dilation=(1, 2)), shapes=((2, 3, 6, 7),)),
    Case("nn_fold", lambda m, x: F(m).fold(x, (5, 6), 2, padding=1), shapes=((2, 8, 42),)),
    Case("nn_unfold_dd", lambda m, x, y: F(m).unfold(x, 2) * y, shapes=((2, 3, 5, 4), (2, 12, 12)),
         dtypes=F64, double_backward=True),
    Case("nn_fold_dd", lambda m, x, y: F(m).fold(x * y, (3, 4), 2), shapes=((2, 8, 6), (2, 8, 6)),
         dtypes=F64, double_backward=True),
    # ---- pooling ------------------------------------------------------------------------------------
    Case("nn_max_pool2d", lambda m, x: F(m).max_pool2d(x, 3, 2, 1, return_indices=True), shapes=((2, 3, 7, 8),)),
    Case("nn_max_pool2d_ceil_dil", lambda m, x: F(m).max_pool2d(x, (3, 2), (2, 3), 1, dilation=(1, 2), ceil_mode=True,
                                                               return_indices=True), shapes=((2, 3, 7, 8),)),
    Case("nn_max_pool2d_overlap", lambda m, x: F(m).max_pool2d(x, 3, 1), shapes=((2, 3, 6, 5),)),
    Case("nn_max_pool2d_unbatched", lambda m, x: F(m).max_pool2d(x, 2), shapes=((3, 6, 5),)),
    Case("nn_max_pool2d_dd", lambda m, x, y: F(m).max_pool2d(x, 2, 1) * y, shapes=((2, 3, 5, 4), (2, 3, 4, 3)),
         dtypes=F64, double_backward=True),
    Case("nn_max_pool1d", lambda m, x: F(m).max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
         shapes=((2, 3, 8),)),
    Case("nn_avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1), shapes=((2, 3, 7, 8),)),
    Case("nn_avg_pool2d_ceil_nopad", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         shapes=((2, 3, 7, 8),)),
    Case("nn_avg_pool2d_ceil", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True), shapes=((2, 3, 8, 8),)),
    Case("nn_avg_pool2d_divisor", lambda m, x: F(m).avg_pool2d(x, 2, 1, 1, divisor_override=3), shapes=((2, 3, 5, 4),)),
    Case("nn_avg_pool2d_dd", lambda m, x, y: F(m).avg_pool2d(x, 2, 1, 1, ceil_mode=True) * y,
         shapes=((2, 3, 5, 4), (2, 3, 6, 5)), dtypes=F64, double_backward=True),
    Case("nn_avg_pool1d", lambda m, x: F(m).avg_pool1d(x, 3, 2, 1), shapes=((2, 3, 8),)),
    Case("nn_adaptive_avg_pool2d", lambda m, x: F(m).adaptive_avg_pool2d(x, (3, 5)), shapes=((2, 3, 7, 8),)),
    Case("nn_adaptive_avg_pool2d_div", lambda m, x: F(m).adaptive_avg_pool2d(x, (2, None)), shapes=((2, 3, 6, 8),)),
    Case("nn_adaptive_avg_pool2d_global", lambda m, x: F(m).adaptive_avg_pool2d(x, 1), shapes=((2, 3, 6, 8),)),
    Case("nn_adaptive_avg_pool1d", lambda m, x: F(m).adaptive_avg_pool1d(x, 3), shapes=((2, 3, 7),)),
    Case("nn_adaptive_max_pool2d", lambda m, x: F(m).adaptive_max_pool2d(x, (3, 5), return_indices=True),
         shapes=((2, 3, 7, 8),)),
    Case("nn_adaptive_max_pool2d_div", lambda m, x: F(m).adaptive_max_pool2d(x, (3, 4)), shapes=((2, 3, 6, 8),)),
    Case("nn_adaptive_max_pool2d_dd", lambda m, x, y: F(m).adaptive_max_pool2d(x, 3) * y,
         shapes=((2, 3, 5, 4), (2, 3, 3, 3)), dtypes=F64, double_backward=True),
    Case("nn_adaptive_max_pool1d", lambda m, x: F(m).adaptive_max_pool1d(x, 3, return_indices=True),
         shapes=((2, 3, 7),)),
    Case("nn_lp_pool2d", lambda m, x: F(m).lp_pool2d(x, 2, 2), shapes=((2, 3, 6, 8),), low=0.5, high=2.0),
    Case("nn_lp_pool1d", lambda m, x: F(m).lp_pool1d(x, 3, 2), shapes=((2, 3, 6),), low=0.5, high=2.0),
    Case("nn_max_unpool2d", lambda m, x: F(m).max_unpool2d(*F(m).max_pool2d(x, 2, return_indices=True), 2),
         shapes=((2, 3, 6, 4),)),
    Case("nn_max_unpool1d", lambda m, x: F(m).max_unpool1d(*F(m).max_pool1d(x, 2, return_indices=True), 2,
                                                           output_size=(7,)),
         shapes=((2, 3, 7),)),
    # ---- padding --------------------------------------------------------------------------------------
    Case("nn_pad_constant", lambda m, x: F(m).pad(x, (1, 2, -1, 0, 1, 1), value=2.5), shapes=((2, 3, 4, 5),),
         double_backward=True),
    Case("nn_pad_reflect", lambda m, x: F(m).pad(x, (1, 2, 2, 0), mode="reflect"), shapes=((2, 3, 4, 5),)),
    Case("nn_pad_replicate", lambda m, x: F(m).pad(x, (3, 2), mode="replicate"), shapes=((3, 4, 5),)),
    Case("nn_pad_circular", lambda m, x: F(m).pad(x, (-1, 2, 2, 1), mode="circular"), shapes=((2, 3, 4, 5),)),
    Case("nn_pad_reflect_3d", lambda m, x: F(m).pad(x, (1, 1, 1, 0, 0, 2), mode="reflect"), shapes=((2, 3, 4, 5),)),
    # ---- interpolation ---------------------------------------------------------------------------------
    Case("nn_interp_nearest", lambda m, x: F(m).interpolate(x, scale_factor=1.7), shapes=((2, 3, 5, 6),)),
    Case("nn_interp_nearest_size", lambda m, x: F(m).interpolate(x, size=(3, 13)), shapes=((2, 3, 5, 6),)),
    Case("nn_interp_nearest_exact", lambda m, x: F(m).interpolate(x, scale_factor=(0.5, 2.5), mode="nearest-exact"),
         shapes=((2, 3, 5, 6),)),
    Case("nn_interp_bilinear", lambda m, x: F(m).interpolate(x, scale_factor=1.7, mode="bilinear"),
         shapes=((2, 3, 5, 6),)),
    Case("nn_interp_bilinear_ac", lambda m, x: F(m).interpolate(x, size=(3, 9), mode="bilinear", align_corners=True),
         shapes=((2, 3, 5, 6),)),
    Case("nn_interp_bicubic", lambda m, x: F(m).interpolate(x, scale_factor=2, mode="bicubic"), shapes=((2, 3, 4, 5),)),
    Case("nn_interp_bicubic_ac", lambda m, x: F(m).interpolate(x, size=(3, 7), mode="bicubic", align_corners=True),
         shapes=((2, 3, 5, 4),)),
    Case("nn_interp_linear", lambda m, x: F(m).interpolate(x, scale_factor=1.5, mode="linear"), shapes=((2, 3, 5),)),
    Case("nn_interp_trilinear", lambda m, x: F(m).interpolate(x, scale_factor=1.5, mode="trilinear",
                                                             recompute_scale_factor=True), shapes=((2, 3, 3, 4, 5),)),
    Case("nn_interp_area", lambda m, x: F(m).interpolate(x, size=(3, 4), mode="area"), shapes=((2, 3, 7, 8),)),
    Case("nn_pixel_shuffle", lambda m, x: F(m).pixel_shuffle(x, 2), shapes=((2, 8, 3, 4),)),
    Case("nn_pixel_unshuffle", lambda m, x: F(m).pixel_unshuffle(x, 2), shapes=((2, 3, 4, 6),)),
]
