"""PyTorch models that compute exactly what locost's `t5` and `locost` families compute.

Both are encoder-decoders with T5's decoder; they differ in the encoder:

  t5       self-attention with T5's bucketed relative position bias (docs/models.md §2.3)
  locost   gated bidirectional S4D convolutions (LOCOST §4; docs/models.md §1)

The parameter names are the Hugging Face names locost reads (shared.weight,
encoder.block.N.layer.0.SelfAttention.q.weight, encoder.block.N.layer.0.ssm_layer.kernel.C, ...,
lm_head.weight), so `state_dict()` is what export.py writes. config_t5() and config_locost() give
the config.json dict; Seq2Seq(config) builds the model from it.

Conventions locost holds the model to (the C++ in include/locost/ is the reference):
  * Embeddings are not scaled; there are no absolute positions. Only block 0 of a stack stores the
    relative bias table; every block of that stack adds it. No 1/sqrt(d_kv) in attention scores.
  * RMSNorm: w * x / sqrt(mean(x^2) + eps), no mean, no bias. Sub-layers are pre-norm + residual.
  * feed_forward_proj "gated-gelu" is gelu_new (the tanh form), "gelu" the erf form.
  * LM head: lm_head.weight when untied; when tied (tie_word_embeddings true) shared.weight, with the
    decoder output scaled by d_model^-0.5 first.
  * S4D kernel (§1.1): dt = exp(log_dt), A = -exp(inv_A_real) + i A_imag, z = exp(dt A),
    Ceff[c] = B C[c] (z - 1) / A, K[c, l] = 2 Re sum_n Ceff[c, n] z^l. Only C has a direction index.
  * Convolution (§1.2): y[j] = sum_{l<=j} kf[j-l] v[l] + sum_{l>=j} kb[l-j] v[l] + D v[j]; lag 0
    gets kf[0] + kb[0] + D. Computed as a linear (zero-padded, size 2L) FFT convolution.
  * Gated S4D layer (§1.3): u = RMSNorm(x); v = mask * (u Wk^T + bk); y = BiConv(v);
    y = y * (u Wq^T + bq) (gating, no activation); x = x + y Wo^T + bo.
  * Padding: encoder self-attention masks padded keys; the S4D layer zeroes padded v; the decoder's
    cross-attention masks padded encoder positions.

Dropout (config dropout_rate) is applied in training mode only, where T5 applies it (embeddings,
attention weights, feed-forward hidden, each sub-layer's output, the final norm's output); in
eval mode the models are deterministic and equal locost's.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_ID, EOS_ID, DECODER_START_ID = 0, 1, 0
IGNORE_INDEX = -100


# ----------------------------------------------------------------------------------------------
# config.json


def config_t5(vocab_size, d_model=256, d_ff=None, num_layers=4, num_decoder_layers=None, num_heads=None, d_kv=64,
              feed_forward_proj="gated-gelu", tie_word_embeddings=False, relative_attention_num_buckets=32,
              relative_attention_max_distance=128, dropout_rate=0.1, layer_norm_epsilon=1e-6):
    """config.json of a T5 (T5Config's fields; T5 v1.1 style by default: gated-gelu, untied head)."""
    num_heads = num_heads or max(1, d_model // d_kv)
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": "t5",
        "vocab_size": int(vocab_size),
        "d_model": int(d_model),
        "d_ff": int(d_ff or 4 * d_model),
        "d_kv": int(d_kv),
        "num_layers": int(num_layers),
        "num_decoder_layers": int(num_decoder_layers or num_layers),
        "num_heads": int(num_heads),
        "relative_attention_num_buckets": int(relative_attention_num_buckets),
        "relative_attention_max_distance": int(relative_attention_max_distance),
        "dropout_rate": float(dropout_rate),
        "layer_norm_epsilon": float(layer_norm_epsilon),
        "initializer_factor": 1.0,
        "feed_forward_proj": feed_forward_proj,
        "tie_word_embeddings": bool(tie_word_embeddings),
        "is_encoder_decoder": True,
        "use_cache": True,
        "pad_token_id": PAD_ID,
        "eos_token_id": EOS_ID,
        "decoder_start_token_id": DECODER_START_ID,
    }


def config_locost(vocab_size, d_model=256, d_ff=None, num_layers=4, num_decoder_layers=None, num_heads=None, d_kv=64,
                  d_state=64, bidirectional=True, gating=True, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                  relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1,
                  layer_norm_epsilon=1e-6):
    """config.json of a LOCOST model (LOCOSTConfig: T5Config's fields plus the S4D encoder's).

    d_state is N (N/2 complex modes per channel). num_ssm_heads is 1, the only count locost runs.
    use_fast_fft_conv is false: the convolution trained here is the exact linear one, locost's default
    (the original's CUDA path computes a shifted backward kernel for most lengths, docs/models.md §1.2).
    local_radius, global_block_size and encoder_attention_type are LOCOSTConfig's fields, unused.
    """
    if d_state % 2:
        raise ValueError("d_state must be even (d_state / 2 complex modes)")
    c = config_t5(vocab_size, d_model, d_ff, num_layers, num_decoder_layers, num_heads, d_kv, feed_forward_proj,
                  tie_word_embeddings, relative_attention_num_buckets, relative_attention_max_distance, dropout_rate,
                  layer_norm_epsilon)
    c.update({
        "architectures": ["LOCOSTForConditionalGeneration"],
        "model_type": "locost",
        "d_state": int(d_state),
        "num_ssm_heads": 1,
        "bidirectional": bool(bidirectional),
        "gating": bool(gating),
        "use_fast_fft_conv": False,
        "local_radius": 127,
        "global_block_size": 16,
        "encoder_attention_type": "local",
    })
    return c


def make_config(kind, vocab_size, **sizes):
    """config_t5 or config_locost by name ('t5' or 'locost')."""
    if kind == "t5":
        sizes.pop("d_state", None)
        sizes.pop("bidirectional", None)
        sizes.pop("gating", None)
        return config_t5(vocab_size, **sizes)
    if kind == "locost":
        return config_locost(vocab_size, **sizes)
    raise ValueError("unknown model kind %r (t5 or locost)" % kind)


# ----------------------------------------------------------------------------------------------
# Shared pieces


class RMSNorm(nn.Module):
    """T5's LayerNorm: w * x / sqrt(mean(x^2) + eps)."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        ms = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(ms + self.eps)).to(self.weight.dtype)


def activation(name):
    return {
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu,
    }[name]


def parse_feed_forward_proj(proj):
    """("gelu_new", True) for "gated-gelu": the activation and whether the layer is gated."""
    gated = proj.startswith("gated-")
    act = proj[len("gated-"):] if gated else proj
    if act not in ("relu", "gelu", "gelu_new", "silu"):
        raise ValueError("feed_forward_proj %r: expected ACT or gated-ACT, ACT one of relu, gelu, gelu_new, silu" % proj)
    if gated and act == "gelu":
        act = "gelu_new"  # transformers' meaning of "gated-gelu"
    return act, gated


class DenseFF(nn.Module):
    """T5DenseActDense / T5DenseGatedActDense: wo(act(wi_0 u) * wi_1 u), or wo(act(wi u))."""

    def __init__(self, d_model, d_ff, proj, dropout):
        super().__init__()
        act, self.gated = parse_feed_forward_proj(proj)
        self.act = activation(act)
        if self.gated:
            self.wi_0 = nn.Linear(d_model, d_ff, bias=False)
            self.wi_1 = nn.Linear(d_model, d_ff, bias=False)
        else:
            self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, u):
        hidden = self.act(self.wi_0(u)) * self.wi_1(u) if self.gated else self.act(self.wi(u))
        return self.wo(self.dropout(hidden))


class FeedForwardLayer(nn.Module):
    """x + FF(RMSNorm(x)): names layer.K.DenseReluDense.*, layer.K.layer_norm.weight."""

    def __init__(self, cfg):
        super().__init__()
        self.DenseReluDense = DenseFF(cfg["d_model"], cfg["d_ff"], cfg["feed_forward_proj"], cfg["dropout_rate"])
        self.layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x):
        return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's bucket of r = key - query (docs/models.md §2.2), the log branch in float32 as locost does."""
    r = relative_position
    if bidirectional:
        num_buckets //= 2
        offset = (r > 0).long() * num_buckets
        n = r.abs()
    else:
        offset = torch.zeros_like(r)
        n = (-r).clamp(min=0)
    max_exact = num_buckets // 2
    ratio = torch.tensor(math.log(max_distance / max_exact), dtype=torch.float32)
    scaled = torch.log(n.float() / torch.tensor(float(max_exact))) / ratio * torch.tensor(float(num_buckets - max_exact))
    # n = 0 gives log 0 = -inf; that lane takes the exact branch, so only keep the cast finite
    large = max_exact + torch.nan_to_num(scaled, neginf=0.0).long()
    large = large.clamp(max=num_buckets - 1)
    return offset + torch.where(n < max_exact, n, large)


class Attention(nn.Module):
    """T5Attention: q, k, v, o without biases, unscaled scores, optional relative bias table."""

    def __init__(self, cfg, has_relative_bias, bidirectional):
        super().__init__()
        self.heads, self.d_kv = cfg["num_heads"], cfg["d_kv"]
        inner = self.heads * self.d_kv
        d = cfg["d_model"]
        self.q = nn.Linear(d, inner, bias=False)
        self.k = nn.Linear(d, inner, bias=False)
        self.v = nn.Linear(d, inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        self.bidirectional = bidirectional
        self.num_buckets = cfg["relative_attention_num_buckets"]
        self.max_distance = cfg["relative_attention_max_distance"]
        if has_relative_bias:
            self.relative_attention_bias = nn.Embedding(self.num_buckets, self.heads)
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def position_bias(self, Lq, Lk, device):
        """(1, heads, Lq, Lk) from this module's table (block 0's)."""
        i = torch.arange(Lq, device=device)[:, None]
        j = torch.arange(Lk, device=device)[None, :]
        buckets = relative_position_bucket(j - i, self.bidirectional, self.num_buckets, self.max_distance)
        return self.relative_attention_bias(buckets).permute(2, 0, 1).unsqueeze(0)

    def split(self, t):  # (B, L, heads*d_kv) -> (B, heads, L, d_kv)
        B, L, _ = t.shape
        return t.view(B, L, self.heads, self.d_kv).transpose(1, 2)

    def forward(self, u, kv, bias):
        """u (B, Lq, H) queries' input, kv (B, Lk, H) keys' input, bias (B or 1, heads or 1, Lq, Lk)."""
        q, k, v = self.split(self.q(u)), self.split(self.k(kv)), self.split(self.v(kv))
        scores = torch.matmul(q, k.transpose(-1, -2)) + bias  # (B, heads, Lq, Lk)
        p = self.dropout(torch.softmax(scores.float(), dim=-1).type_as(scores))
        ctx = torch.matmul(p, v).transpose(1, 2).reshape(u.shape[0], u.shape[1], -1)
        return self.o(ctx)


class SelfAttentionLayer(nn.Module):
    """x + SelfAttention(RMSNorm(x)): names layer.0.SelfAttention.*, layer.0.layer_norm.weight."""

    def __init__(self, cfg, has_relative_bias, bidirectional):
        super().__init__()
        self.SelfAttention = Attention(cfg, has_relative_bias, bidirectional)
        self.layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x, bias):
        u = self.layer_norm(x)
        return x + self.dropout(self.SelfAttention(u, u, bias))


class CrossAttentionLayer(nn.Module):
    """x + EncDecAttention(RMSNorm(x), h): names layer.1.EncDecAttention.*, layer.1.layer_norm.weight."""

    def __init__(self, cfg):
        super().__init__()
        self.EncDecAttention = Attention(cfg, False, False)
        self.layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x, h, bias):
        return x + self.dropout(self.EncDecAttention(self.layer_norm(x), h, bias))


class Block(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)


def key_mask_bias(mask, dtype):
    """(B, 1, 1, Lk): 0 for a real key, the most negative float for a padded one."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


# ----------------------------------------------------------------------------------------------
# Encoders and the decoder


class T5Encoder(nn.Module):
    """x = shared[ids]; per block x += SelfAttention (bidirectional bias + padding), x = FF(x); RMSNorm."""

    def __init__(self, cfg):
        super().__init__()
        self.block = nn.ModuleList(
            Block([SelfAttentionLayer(cfg, i == 0, True), FeedForwardLayer(cfg)]) for i in range(cfg["num_layers"]))
        self.final_layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x, mask):
        L = x.shape[1]
        bias = self.block[0].layer[0].SelfAttention.position_bias(L, L, x.device) + key_mask_bias(mask, x.dtype)
        x = self.dropout(x)
        for blk in self.block:
            x = blk.layer[0](x, bias)
            x = blk.layer[1](x)
        return self.dropout(self.final_layer_norm(x))


def s4d_block_length(L):
    """Block length T for the kernel's factorisation K[bT + j] (any T gives the same K)."""
    return max(1, int(math.ceil(math.sqrt(L))))


class S4DKernel(nn.Module):
    """The diagonal SSM's parameters (ssm_layer.kernel.*) and K[c, h, 0..L).

    Shapes as stored: log_dt (H), inv_A_real (H, N/2), A_imag (H, N/2), B (H, N/2, 2),
    C (channels, H, N/2, 2); a trailing 2 is (real, imaginary). Initialisation as the original's
    "diag-lin": dt log-uniform in [1e-3, 1e-1], A = -0.5 + i pi n, B = 1, C complex normal of unit
    variance.

    K is a product of two small factors, z^l = z^(bT) z^j with l = bT + j:
        K[c, bT + j] = 2 Re sum_n (Ceff[c, n] z[n]^(bT)) z[n]^j
    the factors computed in float64 (exp of dtA times the exact position), their product as one
    real float32 GEMM per channel, as locost computes it. No (H, N/2, L) tensor of powers is ever
    built, and autograd keeps only the factors.
    """

    def __init__(self, H, d_state, channels, generator=None):
        super().__init__()
        m = d_state // 2
        u = torch.rand(H, generator=generator)
        self.log_dt = nn.Parameter(u * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        self.inv_A_real = nn.Parameter(torch.full((H, m), math.log(0.5)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(m, dtype=torch.float32).repeat(H, 1))
        self.B = nn.Parameter(torch.stack([torch.ones(H, m), torch.zeros(H, m)], -1))
        self.C = nn.Parameter(torch.randn(channels, H, m, 2, generator=generator) * math.sqrt(0.5))

    def forward(self, L):
        """K (channels, H, L), float32."""
        dt = torch.exp(self.log_dt.double())[:, None]                         # (H, 1)
        A = torch.complex(-torch.exp(self.inv_A_real.double()), self.A_imag.double())  # (H, m)
        dtA = dt * A
        B = torch.view_as_complex(self.B.double().contiguous())               # (H, m)
        C = torch.view_as_complex(self.C.double().contiguous())               # (ch, H, m)
        # (z - 1)/A as (z - 1) conj(A) / |A|^2: Re A < 0, so |A|^2 > 0
        zoh = (torch.exp(dtA) - 1) * A.conj() / (A.real ** 2 + A.imag ** 2)
        Ceff = C * (B * zoh)                                                   # (ch, H, m)
        T = s4d_block_length(L)
        blocks = (L + T - 1) // T
        j = torch.arange(T, dtype=torch.float64, device=dtA.device)
        bT = torch.arange(blocks, dtype=torch.float64, device=dtA.device) * T
        P = torch.exp(dtA[:, :, None] * j).transpose(1, 2)                     # (H, T, m)        z^j
        W = Ceff[:, :, None, :] * torch.exp(dtA[:, None, :] * bT[:, None])[None]  # (ch, H, blocks, m)
        # 2 Re(W P^T) = 2 [Re W | -Im W] [Re P | Im P]^T: one real float32 GEMM per channel h
        Pr = torch.cat([P.real, P.imag], -1).float()                            # (H, T, 2m)
        Wr = torch.cat([W.real, -W.imag], -1).float()                           # (ch, H, blocks, 2m)
        ch, H = Wr.shape[0], Wr.shape[1]
        Wr = Wr.transpose(0, 1).reshape(H, ch * blocks, -1)                     # (H, ch*blocks, 2m)
        K = 2 * torch.bmm(Wr, Pr.transpose(1, 2))                               # (H, ch*blocks, T)
        return K.reshape(H, ch, blocks * T)[..., :L].transpose(0, 1)            # (ch, H, L)


def bidirectional_conv(v, K, D):
    """y[j] = sum_{l<=j} kf[j-l] v[l] + sum_{l>=j} kb[l-j] v[l] + D v[j].

    v (B, H, L), K (channels, H, L), D (H). A circular convolution of size M = 2L with
    c[j] = kf[j], c[(M - j) mod M] += kb[j]: M >= 2L - 1, so nothing wraps into outputs 0..L-1
    (the linear convolution).
    """
    L = v.shape[-1]
    M = 2 * L
    kf = K[0]
    if K.shape[0] == 2:
        kb = K[1]
        zeros = kf.new_zeros(kf.shape[0], M - 2 * L + 1)
        c = torch.cat([kf[:, :1] + kb[:, :1], kf[:, 1:], zeros, kb[:, 1:].flip(-1)], dim=-1)  # (H, M)
    else:
        c = F.pad(kf, (0, M - L))
    spectrum = torch.fft.rfft(v, n=M) * torch.fft.rfft(c, n=M)
    y = torch.fft.irfft(spectrum, n=M)[..., :L]
    return y + D[:, None] * v


class S4D(nn.Module):
    """ssm_layer: kernel, D, q_proj (gating), k_proj, output_linear. Input u = RMSNorm(x)."""

    def __init__(self, cfg, generator=None):
        super().__init__()
        H = cfg["d_model"]
        self.channels = 2 if cfg.get("bidirectional", True) else 1
        self.gating = cfg.get("gating", True)
        self.kernel = S4DKernel(H, cfg["d_state"], self.channels, generator)
        self.D = nn.Parameter(torch.randn(H, generator=generator))
        if self.gating:
            self.q_proj = nn.Linear(H, H)
        self.k_proj = nn.Linear(H, H)
        self.output_linear = nn.Linear(H, H)

    def forward(self, u, mask):
        """u (B, L, H), mask (B, L) of 0/1 -> the sub-layer's output (B, L, H), before the residual."""
        v = self.k_proj(u) * mask[:, :, None].to(u.dtype)
        K = self.kernel(u.shape[1])
        y = bidirectional_conv(v.transpose(1, 2), K, self.D).transpose(1, 2)
        if self.gating:
            y = y * self.q_proj(u)
        return self.output_linear(y)


class S4DLayer(nn.Module):
    """x + S4D(RMSNorm(x)): names layer.0.layer_prenorm.weight, layer.0.ssm_layer.*."""

    def __init__(self, cfg, generator=None):
        super().__init__()
        self.layer_prenorm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.ssm_layer = S4D(cfg, generator)
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x, mask):
        return x + self.dropout(self.ssm_layer(self.layer_prenorm(x), mask))


class LocostEncoder(nn.Module):
    """x = shared[ids]; per block x = GatedS4D(x), x = FF(x); RMSNorm."""

    def __init__(self, cfg, generator=None):
        super().__init__()
        if cfg.get("num_ssm_heads", 1) != 1:
            raise ValueError("num_ssm_heads must be 1 (the only count locost runs)")
        self.block = nn.ModuleList(Block([S4DLayer(cfg, generator), FeedForwardLayer(cfg)]) for _ in range(cfg["num_layers"]))
        self.final_layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, x, mask):
        x = self.dropout(x)
        for blk in self.block:
            x = blk.layer[0](x, mask)
            x = blk.layer[1](x)
        return self.dropout(self.final_layer_norm(x))


class T5Decoder(nn.Module):
    """x = shared[tokens]; per block self-attention (causal, unidirectional bias), cross-attention
    (no bias, padded encoder positions masked), FF; RMSNorm."""

    def __init__(self, cfg):
        super().__init__()
        n = cfg.get("num_decoder_layers") or cfg["num_layers"]
        self.block = nn.ModuleList(
            Block([SelfAttentionLayer(cfg, i == 0, False), CrossAttentionLayer(cfg), FeedForwardLayer(cfg)]) for i in range(n))
        self.final_layer_norm = RMSNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, y, h, enc_mask):
        T = y.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()
        self_bias = self.block[0].layer[0].SelfAttention.position_bias(T, T, y.device)
        self_bias = self_bias.masked_fill(~causal, torch.finfo(y.dtype).min)
        cross_bias = key_mask_bias(enc_mask, y.dtype)
        y = self.dropout(y)
        for blk in self.block:
            y = blk.layer[0](y, self_bias)
            y = blk.layer[1](y, h, cross_bias)
            y = blk.layer[2](y)
        return self.dropout(self.final_layer_norm(y))


# ----------------------------------------------------------------------------------------------
# The model


class Seq2Seq(nn.Module):
    """A T5 (config model_type "t5") or a LOCOST model ("locost") with T5's decoder."""

    def __init__(self, cfg, seed=None):
        super().__init__()
        self.config = dict(cfg)
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        H, V = cfg["d_model"], cfg["vocab_size"]
        self.shared = nn.Embedding(V, H)
        kind = cfg["model_type"]
        if kind == "t5":
            self.encoder = T5Encoder(cfg)
        elif kind == "locost":
            self.encoder = LocostEncoder(cfg, generator)
        else:
            raise ValueError("model_type %r: expected t5 or locost" % kind)
        self.decoder = T5Decoder(cfg)
        self.tied = cfg.get("tie_word_embeddings", True)
        # transformers 4 scales the decoder output exactly when the head is tied (locost: §2.6)
        self.head_scale = H ** -0.5 if cfg.get("scale_decoder_outputs", self.tied) else 1.0
        if not self.tied:
            self.lm_head = nn.Linear(H, V, bias=False)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator=None):
        """T5PreTrainedModel._init_weights (factor 1) for T5's tensors, except an untied lm_head: N(0,
        d_model^-1/2) instead of N(0, 1), so that a model trained from scratch starts from logits of
        order 1 (transformers' N(0, 1) gives logits of standard deviation sqrt(d_model) and an initial
        loss far above log(vocab)). The S4D layers keep their own initialisation, and their linear
        layers PyTorch's default U(+-1/sqrt(fan_in))."""
        cfg = self.config
        H, F_, kv, heads = cfg["d_model"], cfg["d_ff"], cfg["d_kv"], cfg["num_heads"]

        def normal(t, sd):
            t.copy_(torch.randn(t.shape, generator=generator) * sd)

        normal(self.shared.weight, 1.0)
        if not self.tied:
            normal(self.lm_head.weight, H ** -0.5)
        for name, mod in self.named_modules():
            if isinstance(mod, DenseFF):
                for lin in ([mod.wi_0, mod.wi_1] if mod.gated else [mod.wi]):
                    normal(lin.weight, H ** -0.5)
                normal(mod.wo.weight, F_ ** -0.5)
            elif isinstance(mod, Attention):
                normal(mod.q.weight, (H * kv) ** -0.5)
                normal(mod.k.weight, H ** -0.5)
                normal(mod.v.weight, H ** -0.5)
                normal(mod.o.weight, (heads * kv) ** -0.5)
                if hasattr(mod, "relative_attention_bias"):
                    normal(mod.relative_attention_bias.weight, H ** -0.5)
            elif isinstance(mod, S4D):
                for lin in [mod.k_proj, mod.output_linear] + ([mod.q_proj] if mod.gating else []):
                    bound = lin.in_features ** -0.5
                    lin.weight.copy_((torch.rand(lin.weight.shape, generator=generator) * 2 - 1) * bound)
                    lin.bias.copy_((torch.rand(lin.bias.shape, generator=generator) * 2 - 1) * bound)

    def head_weight(self):
        return self.shared.weight if self.tied else self.lm_head.weight

    def encode(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.encoder(self.shared(input_ids), attention_mask)

    def decode(self, decoder_input_ids, h, attention_mask):
        y = self.decoder(self.shared(decoder_input_ids), h, attention_mask)
        if self.head_scale != 1.0:
            y = y * self.head_scale
        return F.linear(y, self.head_weight())

    def forward(self, input_ids, attention_mask=None, decoder_input_ids=None):
        """Teacher-forced logits (B, T, vocab) of decoder_input_ids (starting with the start token)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.decode(decoder_input_ids, self.encode(input_ids, attention_mask), attention_mask)

    def loss(self, input_ids, attention_mask, labels):
        """Mean cross-entropy over the label tokens (label -100: ignored); the decoder reads
        shift_right(labels)."""
        logits = self(input_ids, attention_mask, shift_right(labels))
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)

    def export_state(self):
        """The tensors a checkpoint stores, by their Hugging Face names (shared.weight once; the
        stacks' embed_tokens are the same tensor and left to the loader's tie)."""
        return {k: v.detach() for k, v in self.state_dict().items()}


def shift_right(labels, start=DECODER_START_ID, pad=PAD_ID):
    """T5's _shift_right: [start, labels[:-1]] with -100 replaced by pad."""
    out = labels.new_full(labels.shape, pad)
    out[:, 1:] = labels[:, :-1]
    out[:, 0] = start
    return out.masked_fill(out == IGNORE_INDEX, pad)


def pad_batch(rows, pad=PAD_ID, dtype=torch.long):
    """(ids (B, L), mask (B, L)) of lists of ids, padded on the right."""
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad, dtype=dtype)
    mask = torch.zeros((len(rows), L), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r, dtype=dtype)
        mask[b, :len(r)] = 1
    return ids, mask


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
