"""Issue 28's cases: devices this MindSpore was not built for, and amp flags it cannot honour."""


# error_cases.inputs first: it puts the repository and tests/ on sys.path
from error_cases.inputs import ends_listing, p, SST2_SMALL


# ------------------------------------------------------------------ issue 28: devices this MindSpore was not built for
def issue_28_devices(add, train, evaluate):
    import mindspore as ms
    build = f"MindSpore {ms.__version__}"
    add("28a", "evaluate --device GPU (this MindSpore: CPU only)", evaluate(SST2_SMALL, "--device", "GPU"),
        expect="usage", names=["--device GPU", build])
    add("28b", "train --device ascend (this MindSpore: CPU only)", train(p("28b", "out"), "--device", "ascend"),
        expect="usage", names=["--device Ascend", build], check=ends_listing(p("28b", mkdir=True), []))
    add("28c", "export --device GPU", ["export", SST2_SMALL, p("28c", "x.mindir"), "--device", "GPU"],
        expect="usage", names=["--device GPU", build], check=ends_listing(p("28c", mkdir=True), []))
    add("28d", "ALBERT_MIN_DEVICE=GPU evaluate", evaluate(SST2_SMALL), expect="usage",
        names=["ALBERT_MIN_DEVICE=GPU", build], env={"ALBERT_MIN_DEVICE": "GPU"})
    add("28e", "ALBERT_MIN_DEVICE=tpu evaluate", evaluate(SST2_SMALL), expect="usage",
        names=["ALBERT_MIN_DEVICE=tpu"], env={"ALBERT_MIN_DEVICE": "tpu"})
    add("28f", "evaluate --device tpu", evaluate(SST2_SMALL, "--device", "tpu"), expect="usage",
        names=["--device", "tpu"])
    # Mixed precision: a setting this CPU cannot run, and flags that would do nothing.
    add("28g", "train --amp O2 --amp-dtype bfloat16 (no bfloat16 CPU kernels)",
        train(p("28g", "out"), "--amp", "O2", "--amp-dtype", "bfloat16"), expect="error",
        names=["--amp-dtype bfloat16", build], check=ends_listing(p("28g", mkdir=True), []))
    add("28h", "train --amp-dtype float16 without --amp", train(p("28h", "out"), "--amp-dtype", "float16"),
        expect="usage", names=["--amp-dtype", "--amp O0"], check=ends_listing(p("28h", mkdir=True), []))
    add("28i", "train --amp O1 --amp-dtype bfloat16 --loss-scale 64",
        train(p("28i", "out"), "--amp", "O1", "--amp-dtype", "bfloat16", "--loss-scale", "64"),
        expect="usage", names=["--loss-scale", "bfloat16"], check=ends_listing(p("28i", mkdir=True), []))
    add("43.4a", "train --amp bf16 --amp-dtype float16 (bf16 GEMMs take no dtype)",
        train(p("43.4a", "out"), "--amp", "bf16", "--amp-dtype", "float16"),
        expect="usage", names=["--amp-dtype", "--amp bf16"], check=ends_listing(p("43.4a", mkdir=True), []))
    add("43.4b", "ALBERT_MIN_KERNELS=off train --amp bf16 (bf16 GEMMs are the kernels')",
        train(p("43.4b", "out"), "--amp", "bf16"), env={"ALBERT_MIN_KERNELS": "off"}, expect="error",
        names=["--amp bf16", "compiled kernels"], check=ends_listing(p("43.4b", mkdir=True), []))
