# The names a torchtitan TOML job config may use, from torchtitan's own sources (run by
# scripts/framework-names.sh): every field of JobConfig as a dotted "section.key" path, nested
# dataclass fields dotted further (quantize.linear.float8.recipe_name), walked with ast over
# torchtitan/config/job_config.py; then "converter=<name>" for each register_model_converter
# call, "flavor=<model>/<flavor>" for each key of the llama3_args table, and
# "TransformerModelArgs.<field>" for each field of llama3's model arguments.
import ast, re, sys
d, commit = sys.argv[1], sys.argv[2]
def read(f): return open(f"{d}/{f}").read()
tree = ast.parse(read("job_config.py"))
classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
def class_of(annotation):
    # "Foo", or "field(default_factory=Foo)" in the value: the annotation names the class
    if isinstance(annotation, ast.Name) and annotation.id in classes: return annotation.id
    return None
keys = set()
def walk(cls, prefix):
    for stmt in classes[cls].body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = prefix + stmt.target.id
            sub = class_of(stmt.annotation)
            if sub: walk(sub, name + ".")
            else: keys.add(name)
walk("JobConfig", "")
for c in re.findall(r'register_model_converter\(\s*\w+,\s*"([^"]+)"\s*\)', read("float8.py") + read("mx.py")):
    keys.add("converter=" + c)
for f in re.findall(r'^    "([^"]+)": TransformerModelArgs\(', read("llama3_init.py"), re.M):
    keys.add("flavor=llama3/" + f)
args = ast.parse(read("llama3_args.py"))
for n in args.body:
    if isinstance(n, ast.ClassDef) and n.name == "TransformerModelArgs":
        for stmt in n.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                keys.add("TransformerModelArgs." + stmt.target.id)
print(f"# torchtitan TOML names at pytorch/torchtitan {commit}: JobConfig's fields as section.key,")
print("# model converters, llama3 flavors and model arguments (scripts/framework-names.sh)")
for k in sorted(keys): print(k)
