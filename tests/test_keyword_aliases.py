"""Keyword spellings torch accepts (``input=``, ``other=``, ``mat2=``, ``size=``, ``dims=``, ``shape=`` ...)
on common functions, methods, nn.functional and nn.init: each call runs under torch and ember and must give
the same result (random draws: the same shape and dtype)."""
import warnings

import numpy as np
import pytest
import torch

import ember

RANDOM = ("rand", "randn", "randint", "multinomial", "manual_seed", "empty", "init.", "dropout")

CALLS = [
 "L.add(input=a, other=b, alpha=2)", "L.sub(input=a, other=b)", "L.mul(input=a, other=b)", "L.div(input=a, other=b, rounding_mode='floor')",
 "L.pow(input=a, exponent=2)", "L.matmul(input=m, other=m)", "L.mm(input=m, mat2=m)", "L.bmm(input=bm, mat2=bm)",
 "L.cat(tensors=[a,b], dim=0)", "L.stack(tensors=[a,b], dim=0)", "L.where(condition=a>0, input=a, other=b)", "L.clamp(input=a, min=0, max=1)",
 "L.max(input=m, dim=1, keepdim=True)", "L.max(input=a, other=b)", "L.argmax(input=m, dim=1)", "L.softmax(input=m, dim=1)", "L.mean(input=m, dim=1)", "L.std(input=m, dim=1, correction=0)",
 "L.sum(input=m, dim=1)", "L.transpose(input=m, dim0=0, dim1=1)", "L.reshape(input=m, shape=(-1,))", "L.flatten(input=bm, start_dim=1)", "L.squeeze(input=m, dim=0)",
 "L.unsqueeze(input=m, dim=0)", "L.gather(input=m, dim=1, index=idx)", "L.index_select(input=m, dim=0, index=idx[0])", "L.masked_fill(input=m, mask=m>0, value=0.)",
 "L.topk(input=m, k=2, dim=1)", "L.sort(input=m, dim=1, descending=True)", "L.norm(input=m, p=2, dim=1)", "L.abs(input=a)", "L.exp(input=a)", "L.sqrt(input=a.abs())",
 "L.sigmoid(input=a)", "L.tanh(input=a)", "L.log_softmax(input=m, dim=1)", "L.allclose(input=a, other=b)", "L.equal(input=a, other=b)", "L.eq(input=a, other=b)", "L.lt(input=a, other=b)",
 "L.maximum(input=a, other=b)", "L.minimum(input=a, other=b)", "L.outer(input=a, vec2=b)", "L.dot(input=a, tensor=b)", "L.cross(input=m3, other=m3, dim=1)",
 "L.chunk(input=m, chunks=2, dim=1)", "L.split(tensor=m, split_size_or_sections=2, dim=1)", "L.permute(input=bm, dims=(2,0,1))", "L.flip(input=m, dims=(0,))", "L.roll(input=m, shifts=1, dims=0)",
 "L.cumsum(input=m, dim=1)", "L.prod(input=m, dim=1)", "L.any(input=m>0, dim=1)", "L.all(input=m>0)", "L.numel(input=m)", "L.zeros_like(input=m)", "L.ones_like(input=m)", "L.full_like(input=m, fill_value=2)",
 "L.rand_like(input=m)", "L.randn_like(input=m)", "L.lerp(input=a, end=b, weight=0.5)", "L.addmm(input=m, mat1=m, mat2=m)", "L.einsum('ij,jk->ik', m, m)", "L.diag(input=m)", "L.tril(input=m, diagonal=1)",
 "L.triu(input=m)", "L.trace(input=m)", "L.logsumexp(input=m, dim=1)", "L.var(input=m, dim=1)", "L.median(input=m, dim=1)", "L.clamp_min(input=a, min=0)", "L.round(input=a, decimals=1)",
 "L.isnan(input=a)", "L.nan_to_num(input=a, nan=0.)", "L.sign(input=a)", "L.log1p(input=a.abs())", "L.erf(input=a)", "L.bucketize(input=a, boundaries=b.sort()[0])", "L.searchsorted(sorted_sequence=b.sort()[0], input=a)",
 "L.cdist(x1=m, x2=m)", "L.dist(input=a, other=b)", "L.cosine_similarity(x1=m, x2=m, dim=1)", "L.pairwise_distance(x1=m, x2=m)", "L.nn.functional.cosine_similarity(x1=m, x2=m)",
 "L.nn.functional.linear(input=m, weight=m, bias=a.float())", "L.nn.functional.relu(input=a)", "L.nn.functional.gelu(input=a, approximate='tanh')", "L.nn.functional.softmax(input=m, dim=1)",
 "L.nn.functional.dropout(input=a, p=0.0, training=False)", "L.nn.functional.pad(input=m, pad=(1,1), mode='constant', value=0.)", "L.nn.functional.layer_norm(input=m, normalized_shape=(3,))",
 "L.nn.functional.cross_entropy(input=m, target=idx[0])", "L.nn.functional.mse_loss(input=a, target=b)", "L.nn.functional.embedding(input=idx, weight=m)", "L.nn.functional.normalize(input=m, p=2.0, dim=1)",
 "L.nn.functional.conv2d(input=img, weight=w4)", "L.nn.functional.max_pool2d(input=img, kernel_size=2)", "L.nn.functional.avg_pool2d(input=img, kernel_size=2)", "L.nn.functional.interpolate(input=img, scale_factor=2)",
 "L.nn.functional.one_hot(input=idx[0], num_classes=4)", "L.nn.functional.log_softmax(input=m, dim=1)", "L.nn.functional.silu(input=a)", "L.nn.functional.leaky_relu(input=a, negative_slope=0.1)",
 "L.nn.functional.binary_cross_entropy_with_logits(input=a, target=b.sigmoid())", "L.nn.functional.nll_loss(input=m, target=idx[0])", "L.nn.functional.kl_div(input=m, target=m, reduction='batchmean')",
 "L.nn.functional.scaled_dot_product_attention(query=bm, key=bm, value=bm)", "L.nn.functional.unfold(input=img, kernel_size=2)", "L.nn.functional.softplus(input=a, beta=2)", "L.nn.functional.hardtanh(input=a)",
 "a.add(other=b)", "a.mul(other=b)", "a.sub(other=b, alpha=2)", "a.div(other=b)", "a.pow(exponent=2)", "m.view(size=(3,3))", "m.view(dtype=L.int32)", "m.reshape(shape=(9,))", "m.sum(dim=1)", "bm.permute(dims=(2,0,1))", "a.expand(size=(2,3))",
 "a.repeat(repeats=(2,))", "m.transpose(dim0=0, dim1=1)", "m.masked_fill(mask=m>0, value=1.)", "m.gather(dim=1, index=idx)", "m.index_select(dim=0, index=idx[0])", "a.clamp(min=0, max=1)", "m.max(dim=1)", "m.argmax(dim=1, keepdim=True)",
 "m.softmax(dim=1)", "m.matmul(other=m)", "m.mm(mat2=m)", "m.scatter(dim=1, index=idx, src=m)", "m.scatter_add(dim=1, index=idx, src=m)", "m.index_add(dim=0, index=idx[0][:2], source=m[:2])", "a.type_as(other=b)", "a.to(dtype=L.float64)",
 "m.flatten(start_dim=0)", "m.unsqueeze(dim=0)", "m.squeeze(dim=0)", "m.split(split_size=1, dim=0)", "m.chunk(chunks=3, dim=0)", "a.eq(other=b)", "a.where(condition=a>0, other=b)", "m.norm(p=2, dim=1)", "m.std(dim=1, unbiased=False)",
 "m.new_zeros(size=(2,))", "m.new_full(size=(2,), fill_value=1.)", "m.new_tensor(data=[1.])", "a.lerp(end=b, weight=0.3)", "a.addcmul(tensor1=a, tensor2=b, value=2)", "m.topk(k=1)", "m.sort(dim=0)", "m.narrow(dim=0, start=0, length=2)",
 "m.unfold(dimension=0, size=2, step=1)", "m.diagonal(offset=0, dim1=0, dim2=1)", "m.masked_select(mask=m>0)", "m.nonzero(as_tuple=False)", "a.fill_(value=2.)", "m.t().contiguous()", "a.isclose(other=b)", "m.cumsum(dim=0)", "a.dot(tensor=b)",
 "L.nn.functional.grid_sample(input=img, grid=L.zeros(1,2,2,2), align_corners=False)", "L.nn.init.normal_(tensor=m.clone(), mean=0., std=1.)", "L.nn.init.zeros_(tensor=m.clone())", "L.nn.init.xavier_uniform_(tensor=m.clone())",
 "L.nn.init.kaiming_normal_(tensor=m.clone(), mode='fan_out')", "L.nn.init.constant_(tensor=m.clone(), val=1.)", "L.nn.utils.clip_grad_norm_(parameters=[L.nn.Parameter(m.clone())], max_norm=1.0)",
 "L.arange(start=0, end=5, step=1)", "L.linspace(start=0, end=1, steps=5)", "L.zeros(size=(2,3))", "L.ones(size=(2,))", "L.full(size=(2,), fill_value=3.)", "L.eye(n=3)", "L.randn(size=(2,))", "L.rand(size=(2,))", "L.randint(low=0, high=5, size=(3,))",
 "L.tensor(data=[1,2])", "L.as_tensor(data=[1,2])", "L.from_numpy(np.zeros(2))", "L.empty(size=(2,))", "L.multinomial(input=a.abs(), num_samples=1)", "L.manual_seed(seed=0)",
]


def env(L):
    r = np.random.RandomState(0)
    return dict(L=L, np=np, a=L.tensor(r.randn(3)), b=L.tensor(r.randn(3)), m=L.tensor(r.randn(3,3).astype(np.float32)), bm=L.tensor(r.randn(2,3,3).astype(np.float32)),
                m3=L.tensor(r.randn(3,3)), idx=L.tensor([[0,1,2],[2,1,0]]), img=L.tensor(r.randn(1,2,4,4).astype(np.float32)), w4=L.tensor(r.randn(3,2,2,2).astype(np.float32)))


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [x for v in r for x in _flat(v)]
    return [r]


@pytest.mark.parametrize("call", CALLS)
def test_keyword_call_matches_torch(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = eval(call, env(torch))
        e = eval(call, env(ember))
    ts, es = _flat(t), _flat(e)
    assert len(ts) == len(es)
    for a, b in zip(ts, es):
        if isinstance(a, torch.Tensor):
            assert tuple(b.shape) == tuple(a.shape) and str(b.dtype).split(".")[-1] == str(a.dtype).split(".")[-1]
            if not any(r in call for r in RANDOM):
                np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
        elif isinstance(a, (bool, int, float)):
            assert a == pytest.approx(b)
