import re, sys
d, commit = sys.argv[1], sys.argv[2]
def read(f): return open(f"{d}/{f}").read()
def init_args(text, cls):
    body = text.split(f"class {cls}", 1)[1]
    sig = body.split("def __init__(", 1)[1]
    sig = sig.split("\n    )", 1)[0]
    return re.findall(r"^\s+([a-z_0-9]+)\s*:", sig, re.M)
def fields(text):
    return re.findall(r"^    ([a-z_0-9]+): ", text, re.M)
keys = set()
for a in init_args(read("strategy.py"), "MegatronStrategy"): keys.add("trainer.strategy." + a)
for f in fields(read("transformer.py")) + fields(read("gpt.py")): keys.add("model.config." + f)
for f in fields(read("ddp.py")): keys.add("trainer.strategy.ddp." + f)
for f in fields(read("optim.py")): keys.add("optim.config." + f)
for f in fields(read("precision.py")): keys.add("trainer.plugins." + f)
for a in init_args(read("overlap.py"), "MegatronCommOverlapCallback"): keys.add("callback." + a)
for a in init_args(read("mock.py"), "MockDataModule"): keys.add("data." + a)
keys.add("trainer.plugins")
print(f"# NeMo 2 recipe paths at NVIDIA/NeMo {commit} (Megatron-Core fields at NVIDIA/Megatron-LM d98e8a64dd)")
print("# (scripts/framework-names.sh)")
for k in sorted(keys): print(k)
