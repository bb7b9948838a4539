"""Throughput of our MindSpore ALBERT against the transformers reference, measured in one run.

    python benchmarks/encoder_throughput.py                  # base config, seq 128, batch 32
    python benchmarks/encoder_throughput.py --skip-reference # MindSpore only (no torch needed)

Prints sentences/s of the encoder (``AlbertModel`` forward, eval mode) in
PyNative and graph (``mindspore.jit``) mode, and of transformers'
``AlbertModel`` (PyTorch, eager, ``torch.no_grad``) on the same inputs, same
weights and the same number of threads; then fine-tuning steps/s
(forward + backward + clipping + AdamW) for the classifier. Ratios are
ours / reference: above 1 means we are faster.

The reference needs torch and transformers in the same environment; they are
dev-time tools here, never imported by the package.
"""

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="base", help="preset name (base, large, ...) or a config.json path")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=3, help="timed forward passes per mode (after one warm-up)")
    p.add_argument("--train-config", default=None,
                   help="config for the fine-tuning measurement (default: same as --config)")
    p.add_argument("--train-seq", type=int, default=None, help="default: --seq")
    p.add_argument("--train-batch", type=int, default=None, help="default: --batch")
    p.add_argument("--train-iters", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--skip-reference", action="store_true")
    return p.parse_args()


def load_config(name):
    from albert_min.model.config import AlbertConfig
    if os.path.isfile(name):
        return AlbertConfig.from_json_file(name)
    return AlbertConfig.preset(name)


def make_inputs(config, batch, seq, seed=0):
    """Random ids with realistic padding: row lengths from seq/4 to seq."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(5, config.vocab_size, size=(batch, seq)).astype(np.int32)
    lengths = rng.integers(seq // 4, seq + 1, size=batch)
    lengths[0] = seq
    attention_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    input_ids[attention_mask == 0] = 0
    input_ids[:, 0] = 2
    labels = rng.integers(0, 2, size=batch).astype(np.int32)
    return input_ids, np.zeros_like(input_ids), attention_mask, labels


def timed(fn, iters):
    """Seconds per call, after one untimed warm-up call (compilation, allocation)."""
    fn()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


# ---------------------------------------------------------------- MindSpore
def ours_forward(config, inputs, iters, use_jit):
    import mindspore as ms
    from albert_min.model.modeling import AlbertModel
    ms.set_seed(0)
    model = AlbertModel(config)
    model.set_train(False)
    forward = ms.jit(model.construct) if use_jit else model
    tensors = [ms.Tensor(x) for x in inputs[:3]]
    seconds = timed(lambda: forward(*tensors)[0].asnumpy(), iters)
    return seconds, model, forward(*tensors)[0].asnumpy()


def ours_train_step(config, inputs, iters, use_jit):
    import mindspore as ms
    from mindspore import ops
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
    ms.set_seed(0)
    model = kernels.accelerate(AlbertForSequenceClassification(config))   # as the Trainer runs it
    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(2e-5, iters + 10, 0.1), 0.01)

    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)

    step = make_train_step(loss_fn, optimizer, 1.0, use_jit=use_jit)
    tensors = [ms.Tensor(x) for x in inputs]
    return timed(lambda: step(*tensors).asnumpy(), iters)


# ---------------------------------------------------------------- reference
def reference_model(config, cls=None):
    import torch
    import transformers
    hf_config = transformers.AlbertConfig(**{k: v for k, v in config.to_dict().items()
                                             if k not in ("model_type", "id2label", "num_labels")},
                                          num_labels=config.num_labels)
    hf_config._attn_implementation = "eager"
    return (cls or transformers.AlbertModel)(hf_config), torch


def reference_forward(config, inputs, iters, ours_model):
    model, torch = reference_model(config)
    # Same weights as ours: our parameter names are HF's names.
    state = {p.name: torch.from_numpy(p.asnumpy()) for p in ours_model.get_parameters()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in m for m in missing), (missing, unexpected)
    model.eval()
    t = [torch.from_numpy(x.astype(np.int64)) for x in inputs[:3]]
    with torch.no_grad():
        run = lambda: model(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2]).last_hidden_state
        seconds = timed(run, iters)
        return seconds, run().numpy()


def reference_train_step(config, inputs, iters):
    import transformers
    model, torch = reference_model(config, transformers.AlbertForSequenceClassification)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    t = [torch.from_numpy(x.astype(np.int64)) for x in inputs]

    def step():
        loss = torch.nn.functional.cross_entropy(model(input_ids=t[0], token_type_ids=t[1],
                                                       attention_mask=t[2]).logits, t[3])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    return timed(step, iters)


def main():
    args = parse_args()
    from albert_min.common.device import use_device
    use_device("CPU", cpu_threads=args.threads)
    config = load_config(args.config)
    train_config = load_config(args.train_config) if args.train_config else config
    seq, batch = args.seq, args.batch
    train_seq, train_batch = args.train_seq or seq, args.train_batch or batch
    if not args.skip_reference:
        import torch
        torch.set_num_threads(args.threads)
    inputs = make_inputs(config, batch, seq)
    train_inputs = make_inputs(train_config, train_batch, train_seq, seed=1)

    print(f"encoder: {args.config} (H={config.hidden_size}, L={config.num_hidden_layers}), batch {batch}, "
          f"seq {seq}, {args.threads} threads, {args.iters} timed passes", flush=True)
    rows = {}
    s, model, ours_out = ours_forward(config, inputs, args.iters, use_jit=False)
    rows["mindspore pynative"] = s
    print(f"  mindspore pynative   {batch / s:8.2f} sentences/s", flush=True)
    s, _, _ = ours_forward(config, inputs, args.iters, use_jit=True)
    rows["mindspore jit"] = s
    print(f"  mindspore jit        {batch / s:8.2f} sentences/s", flush=True)
    if not args.skip_reference:
        s, ref_out = reference_forward(config, inputs, args.iters, model)
        rows["transformers"] = s
        print(f"  transformers (torch) {batch / s:8.2f} sentences/s   "
              f"(max |ours - reference| = {np.abs(ours_out - ref_out).max():.2e})", flush=True)
        for name in ("mindspore pynative", "mindspore jit"):
            print(f"  ratio {name} / transformers: {rows['transformers'] / rows[name]:.2f}")

    print(f"fine-tuning step: {args.train_config or args.config}, batch {train_batch}, seq {train_seq}, "
          f"{args.train_iters} timed steps", flush=True)
    steps = {}
    for name, use_jit in (("mindspore pynative", False), ("mindspore jit", True)):
        steps[name] = ours_train_step(train_config, train_inputs, args.train_iters, use_jit)
        print(f"  {name:<20} {1 / steps[name]:8.3f} steps/s", flush=True)
    if not args.skip_reference:
        steps["transformers"] = reference_train_step(train_config, train_inputs, args.train_iters)
        print(f"  {'transformers (torch)':<20} {1 / steps['transformers']:8.3f} steps/s")
        for name in ("mindspore pynative", "mindspore jit"):
            print(f"  ratio {name} / transformers: {steps['transformers'] / steps[name]:.2f}")


if __name__ == "__main__":
    main()
