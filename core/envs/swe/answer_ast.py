"""
The answer policy on the syntax tree: the patch may change its own package's
objects only. Reads a JSON request naming the patch's Python files (paths
relative to the current folder, the tree after the patch) and the line numbers
the patch added to each; parses each file with `ast` (it never imports or runs
them) and looks at the nodes on added lines. Prints one line,
`HARNESS-S-AST {"refused": null | "file:line: why"}`; exits 0 when it could
judge, 2 when the request itself is wrong.

What is refused (each with the file, the line and why):
- assigning, augmenting or deleting attributes or items of objects the package
  did not define: names bound by imports from outside the package, builtins,
  what is reached from them (attributes, items, aliases, loop variables over
  them), and what reflection hands out (`vars(module)`, namespace entries);
  `setattr`/`delattr`/`__setattr__` on them; mutating methods (`append`,
  `update`, ...) on their attributes; passing them to a function of the same
  file that assigns to its parameter's attributes;
- reflection that hides names: `getattr`-like calls whose attribute name is
  computed in place (a call's result, an item, a concatenation) rather than a
  literal or a name handed in by a caller, or that read computed names from
  sys, the test machinery or what reflection handed out; `vars()` of anything
  but a few plain modules imported by name (`vars(operator)`); `__dict__` of
  such objects; `getattr`, `vars`, `exec`... passed around as values; objects
  of unittest, pytest, builtins or importlib handed to anything but a plain
  builtin (`isinstance`, `print`, ...);
- `__import__`, `exec`, `eval`, `compile` (the builtins), and names of the
  test machinery spelled as attributes or string literals the text scan
  cannot see (split over lines, literal concatenation `'mod' 'ules'`).

Names are followed through assignments, loops, parameter defaults, the
returns of the same file's functions and the package's own imports (`from
._compat import Case`); an unchanged line is judged too when what it changes
was bound on a changed line. Python is dynamic: this is a simple data-flow,
not a proof. Objects handed to the package's functions in other files, and
attribute names handed to a helper as parameters (generic code such as
jinja's attr filter does this; the shipped gold patches need it), are not
followed; the canaries catch what passes.
"""
import ast
import builtins
import json
import os
import sys

# A file larger than this is refused rather than parsed (the parser's memory grows with it).
MAX_FILE_BYTES = 2_000_000

BUILTIN_NAMES = frozenset(dir(builtins)) | {'__builtins__'}

# Modules whose objects run or judge the tests, or reach every other module:
# no namespace reads, no unbound mutating calls, not passed to other functions.
DANGEROUS_MODULES = frozenset({
    'sys', 'builtins', '__builtin__', 'unittest', 'pytest', '_pytest', 'pluggy', 'doctest', 'importlib', 'imp',
    'gc', 'inspect', 'types', 'site', 'ctypes', '_ctypes', 'atexit', 'faulthandler', 'traceback', 'runpy', 'pkgutil',
    'threading', '_thread', 'warnings', 'logging', 'io', 'os', 'posix', 'signal', 'subprocess', 'code', 'codeop',
    'pdb', 'bdb', 'trace', 'tracemalloc', 'marshal', 'pickle', 'copyreg', 'zipimport', 'operator', 'functools',
})
# vars() of these is allowed (the toolz gold reads vars(operator)); the result is still not the package's.
VARS_ALLOWED = frozenset({'operator', 'math', 'string', 'itertools', 'functools', 'collections', 're', 'keyword'})

# Attribute names that reach the import system, frames, the interpreter's hooks or the test runner, on any object.
FORBIDDEN_ATTRIBUTES = frozenset({
    'meta_path', 'path_hooks', 'path_importer_cache', '_getframe', 'currentframe', 'f_back', 'f_globals', 'f_locals',
    'f_code', 'f_builtins', 'tb_frame', 'gi_frame', 'cr_frame', 'ag_frame', '__globals__', '__builtins__', '__subclasses__',
    '__import__', 'settrace', 'setprofile', 'excepthook', 'unraisablehook', 'addaudithook', 'get_objects', 'get_referrers',
    'get_referents', 'import_module', 'exec_module', 'load_module', '_exit', 'TestReport', 'CallInfo', '_pytest', 'pytest',
    'pluggy',
})
# Names too common to refuse on the package's own objects (`self.modules`), refused on objects it did not define.
FOREIGN_ONLY_ATTRIBUTES = frozenset({'modules', 'displayhook', 'builtins', 'monitoring', 'TestResult', 'TextTestResult', '__loader__', '__spec__'})
# Names of functions that read or write attributes by a name given at run time: (position of the name argument).
GETATTR_LIKE = {'getattr': 1, 'hasattr': 1, 'setattr': 1, 'delattr': 1, 'getattr_static': 1, '__getattribute__': 1,
                '__getattr__': 1, '__setattr__': 1, '__delattr__': 1, 'attrgetter': 0, 'methodcaller': 0}
# Builtins that may only be called, never passed around (a later call would hide what it reaches).
CALL_ONLY = frozenset({'getattr', 'setattr', 'delattr', 'vars', 'globals', 'locals', '__import__', 'exec', 'eval', 'compile', 'breakpoint'})
MUTATORS = frozenset({'append', 'extend', 'insert', 'update', 'setdefault', 'pop', 'popitem', 'clear', 'remove', 'add',
                      'discard', 'sort', 'reverse', '__setitem__', '__delitem__', '__setattr__', '__delattr__',
                      '__iadd__', 'appendleft', 'extendleft'})
# Builtins a foreign object may be handed to: they read it and give back something new.
SAFE_CALLEES = frozenset({'isinstance', 'issubclass', 'id', 'repr', 'str', 'hash', 'len', 'callable', 'type', 'print',
                          'bool', 'format', 'sorted', 'list', 'tuple', 'set', 'frozenset', 'dict', 'iter', 'next',
                          'enumerate', 'zip', 'reversed', 'hasattr', 'getattr', 'vars', 'dir', 'super', 'min', 'max',
                          'any', 'all', 'sum', 'map', 'filter', 'int', 'float', 'ascii', 'open'})
# Calls that hand back (part of) their argument, not a new object.
NEW_CONTAINERS = frozenset({'list', 'tuple', 'sorted', 'dict', 'set', 'frozenset'})
PASS_THROUGH = frozenset({'next', 'iter', 'list', 'tuple', 'sorted', 'reversed', 'dict', 'set', 'frozenset', 'type', 'enumerate', 'zip', 'min', 'max', 'filter'})
CLASS_LINKS = frozenset({'__bases__', '__base__', '__mro__', '__orig_bases__'})
ACCESSORS = frozenset({'get', 'pop', 'setdefault', 'items', 'values', 'keys', 'copy', '__getitem__', '__getattribute__', '__getattr__', 'mro', '__mro__'})

FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
MUTATION_NODES = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For, ast.AsyncFor, ast.Call)
# Pattern matching's captures (Python 3.10 and later).
MATCH_CAPTURES = tuple(getattr(ast, name) for name in ('MatchAs', 'MatchStar') if hasattr(ast, name))
MATCH_MAPPING = tuple(getattr(ast, name) for name in ('MatchMapping',) if hasattr(ast, name))
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Refusal(Exception):
    pass


class Foreign:
    """
    An object the package did not define: `desc` names it, `root` is the
    module (or `builtins`, `namespace`) it comes from; `drawn` when reflection
    handed it out; `module` when an import statement bound it; `holder` when
    it is a container the package made or owns (a copy, globals()) whose
    items are not the package's: changing the holder itself is allowed.
    """

    def __init__(self, desc, root, drawn=False, module=False, holder=False):
        self.desc, self.root, self.drawn, self.module, self.holder = desc, root, drawn, module, holder

    @property
    def dangerous(self):
        return self.drawn or self.root.split('.')[0] in DANGEROUS_MODULES

    def then(self, suffix, drawn=False, holder=False):
        return Foreign(self.desc + suffix, self.root, self.drawn or drawn, holder=holder)


class Scope:
    def __init__(self, node, parent):
        self.node, self.parent = node, parent
        self.bindings = {}
        self.globals, self.nonlocals = set(), set()
        self.is_class = isinstance(node, ast.ClassDef)

    def bind(self, name, binding):
        self.bindings.setdefault(name, []).append(binding)


def literal_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def prefix_literal(node):
    """A name built from a literal prefix that no dangerous name starts with (`'visit_' + kind`, `f'visit_{kind}'`, `'visit_%s' % kind`)."""
    first = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            node = node.left
        first = literal_str(node)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and literal_str(node.left) is not None:
        first = node.left.value.split('%')[0]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'format' and literal_str(node.func.value) is not None:
        first = node.func.value.value.split('{')[0]
    elif isinstance(node, ast.JoinedStr) and node.values:
        first = literal_str(node.values[0])
    return bool(first) and not first.startswith('__') and not any(n.startswith(first) for n in FORBIDDEN_ATTRIBUTES | FOREIGN_ONLY_ATTRIBUTES)


class Checker:
    def __init__(self, path, tree, added, project):
        self.path, self.tree, self.added, self.project = path, tree, added, project
        self.package_names = project.package_names
        self.root = project.root_of(path)
        relative = path[len(self.root) + 1:] if self.root else path
        parts = relative[:-3].split('/') if relative.endswith('.py') else relative.split('/')
        # The package a relative import starts from: the file's folder.
        self.package_parts = parts[:-1]
        self.scope_of = {}
        self.parent = {}
        self.defs = {}  # FunctionDef node -> Scope
        self.resolving = set()
        # While judging an unchanged line: did the object it changes get bound on a changed line?
        self.tracking = False
        self.touched = False
        self.memo = {}
        self.returns = {}

    # --- scopes ---------------------------------------------------------------

    def build_scopes(self):
        """Every node's scope, and every scope's bindings (Python's rules: functions, lambdas and comprehensions are scopes; a class body is one its functions do not see)."""
        self.parent = {}
        stack = [(self.tree, None)]
        while stack:
            node, scope = stack.pop()
            if isinstance(node, ast.Module):
                inner = Scope(node, None)
                self.scope_of[node] = inner
                stack.extend((child, inner) for child in node.body)
                for child in node.body:
                    self.parent[child] = node
                continue
            if isinstance(node, FUNCTION_SCOPES + (ast.ClassDef,) + COMPREHENSIONS):
                inner = Scope(node, scope)
                self.scope_of[node] = inner
                outer_parts, inner_parts = [], []
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    scope.bind(node.name, ('def', node))
                if isinstance(node, FUNCTION_SCOPES):
                    self.defs[node] = inner
                    args = node.args
                    for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                        if arg is not None:
                            inner.bind(arg.arg, ('param', node))
                    # A default is what the parameter holds when no caller hands one in: `lambda c=unittest.TestCase: ...`.
                    positional = args.posonlyargs + args.args
                    for arg, default in list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + list(zip(args.kwonlyargs, args.kw_defaults)):
                        if default is not None:
                            inner.bind(arg.arg, ('default', default, scope))
                    # Defaults and decorators are evaluated in the enclosing scope.
                    outer_parts = args.defaults + [d for d in args.kw_defaults if d is not None] + getattr(node, 'decorator_list', [])
                    inner_parts = (node.body if isinstance(node.body, list) else [node.body]) + ([node.returns] if getattr(node, 'returns', None) else [])
                elif isinstance(node, ast.ClassDef):
                    outer_parts = node.bases + node.keywords + node.decorator_list
                    inner_parts = node.body
                else:
                    # A comprehension's first iterable is evaluated outside it.
                    outer_parts = [node.generators[0].iter]
                    for i, gen in enumerate(node.generators):
                        self.bind_target(inner, gen.target, ('iter', gen.iter, scope if i == 0 else inner))
                        self.parent[gen] = node
                        self.scope_of[gen] = inner
                        for part in [gen.target] + ([gen.iter] if i else []) + gen.ifs:
                            self.parent[part] = gen
                            stack.append((part, inner))
                    inner_parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
                for part in outer_parts:
                    self.parent[part] = node
                    stack.append((part, scope))
                for part in inner_parts:
                    self.parent[part] = node
                    stack.append((part, inner))
                continue
            self.scope_of[node] = scope
            self.bind_statement(node, scope)
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
                stack.append((child, scope))

    def bind_target(self, scope, target, binding):
        if isinstance(target, ast.Name):
            scope.bind(target.id, binding)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind_target(scope, elt, binding if binding[0] != 'assign' else ('part', binding[1], binding[2]))
        elif isinstance(target, ast.Starred):
            self.bind_target(scope, target.value, binding)

    def bind_statement(self, node, scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) and len(target.elts) == len(node.value.elts):
                    for t, v in zip(target.elts, node.value.elts):
                        self.bind_target(scope, t, ('assign', v, scope))
                else:
                    self.bind_target(scope, target, ('assign', node.value, scope))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            self.bind_target(scope, node.target, ('assign', node.value, scope))
        elif isinstance(node, ast.NamedExpr):
            self.bind_target(scope, node.target, ('assign', node.value, scope))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.bind_target(scope, node.target, ('iter', node.iter, scope))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self.bind_target(scope, item.optional_vars, ('other', None, scope))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.bind(alias.asname, ('import', alias.name, 0, None, None, node))
                else:
                    top = alias.name.split('.')[0]
                    scope.bind(top, ('import', top, 0, None, None, node))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != '*':
                    origin = f'{node.module}.{alias.name}' if node.module else alias.name
                    scope.bind(alias.asname or alias.name, ('import', origin if node.level == 0 else None, node.level, node.module, alias.name, node))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name, ('other', None, scope))
        elif isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)
        elif isinstance(node, MATCH_CAPTURES) and node.name:
            scope.bind(node.name, ('other', None, scope))
        elif isinstance(node, MATCH_MAPPING) and node.rest:
            scope.bind(node.rest, ('other', None, scope))

    def lookup(self, name, scope):
        """The bindings a name refers to from `scope`, or 'builtin', or None (unbound)."""
        if name in scope.globals:
            while scope.parent is not None:
                scope = scope.parent
        first = scope
        while scope is not None:
            if scope.is_class and scope is not first:
                scope = scope.parent
                continue
            if name in scope.bindings and name not in scope.nonlocals:
                return scope.bindings[name]
            scope = scope.parent
        return 'builtin' if name in BUILTIN_NAMES else None

    def is_builtin(self, node, scope, *names):
        return isinstance(node, ast.Name) and node.id in names and self.lookup(node.id, scope) == 'builtin'

    # --- what an expression is ----------------------------------------------

    def resolve_import(self, binding):
        """An import binding as ('foreign', Foreign), ('module', dotted name of the package's own module) or ('own', module, name)."""
        origin, level, module, name = binding[1:5]
        if not level:
            top = origin.split('.')[0]
            if top == '__future__':
                return None
            if top not in self.package_names:
                return ('foreign', Foreign(origin, origin, module=True))
        if level:
            if level - 1 > len(self.package_parts):
                return None
            base = self.package_parts[:len(self.package_parts) - (level - 1)]
            target = '.'.join(base + (module.split('.') if module else []))
        else:
            target = module or origin
        if name is None:
            return ('module', target)
        if self.project.file_of(self.root, f'{target}.{name}' if target else name):
            return ('module', f'{target}.{name}' if target else name)
        return ('own', target, name)

    def own_module(self, node, scope):
        """The dotted name of the package's own module the expression is, or None."""
        if isinstance(node, ast.Name):
            bindings = self.lookup(node.id, scope)
            for b in bindings if isinstance(bindings, list) else []:
                if b[0] == 'import':
                    resolved = self.resolve_import(b)
                    if resolved and resolved[0] == 'module':
                        return resolved[1]
            return None
        if isinstance(node, ast.Attribute):
            base = self.own_module(node.value, scope)
            if base and self.project.file_of(self.root, f'{base}.{node.attr}'):
                return f'{base}.{node.attr}'
        return None

    def foreign_in_module(self, module, name):
        """What a name is at the top of another of the package's modules (from .core import Case, where core has Case = unittest.TestCase)."""
        path = self.project.file_of(self.root, module)
        other = self.project.checker(path) if path else None
        if other is None:
            return None
        key = (path, name)
        if key in self.project.resolving:
            return None
        self.project.resolving.add(key)
        try:
            return other.foreign(ast.Name(id=name, ctx=ast.Load()), other.scope_of[other.tree])
        finally:
            self.project.resolving.discard(key)

    def foreign(self, node, scope):
        """A Foreign when the expression's value is an object the package did not define (as far as local data-flow tells), else None."""
        if isinstance(node, ast.Name):
            key = (id(scope), node.id)
            # Each name is worked out once per scope (long files call helpers that call helpers); not while tracking, which needs the walk.
            if not self.tracking and key in self.memo:
                return self.memo[key]
            if key in self.resolving:
                return None
            found = self.foreign_name(node, scope, key)
            if not self.tracking:
                self.memo[key] = found
            return found
        return self.foreign_expression(node, scope)

    def foreign_name(self, node, scope, key):
        self.resolving.add(key)
        try:
            bindings = self.lookup(node.id, scope)
            if bindings == 'builtin':
                return Foreign(f'the builtin {node.id}', 'builtin names', drawn=node.id == '__builtins__')
            for b in bindings or []:
                found = None
                if b[0] == 'import':
                    resolved = self.resolve_import(b)
                    if resolved and resolved[0] == 'foreign':
                        found = resolved[1]
                    elif resolved and resolved[0] == 'own':
                        found = self.foreign_in_module(resolved[1], resolved[2])
                elif b[0] in ('assign', 'part'):
                    found = self.foreign(b[1], b[2])
                elif b[0] == 'iter':
                    it = self.foreign(b[1], b[2])
                    found = it.then(' (an item)') if it else None
                elif b[0] == 'default':
                    found = self.foreign(b[1], b[2])
                if found:
                    if self.tracking and b[0] in ('import', 'assign', 'part', 'iter', 'default') and self.on_added_lines(b[5] if b[0] == 'import' else b[1]):
                        self.touched = True
                    return found
            return None
        finally:
            self.resolving.discard(key)

    def foreign_expression(self, node, scope):
        if isinstance(node, ast.Attribute):
            module = self.own_module(node.value, scope)
            if module:
                return None if self.project.file_of(self.root, f'{module}.{node.attr}') else self.foreign_in_module(module, node.attr)
            base = self.foreign(node.value, scope)
            if base is None and node.attr in CLASS_LINKS:
                return self.bases_of(node.value, scope, node.attr)
            return base.then(f'.{node.attr}', drawn=node.attr == '__dict__') if base and not base.holder else None
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for elt in node.elts:
                found = self.foreign(elt, scope)
                if found:
                    return found.then(' (in a display)', holder=True)
            return None
        if isinstance(node, ast.Dict):
            for value in node.values:
                found = self.foreign(value, scope) if value is not None else None
                if found:
                    return found.then(' (in a display)', holder=True)
            return None
        if isinstance(node, ast.Subscript):
            base = self.foreign(node.value, scope)
            return base.then('[...]') if base else None
        if isinstance(node, ast.Starred):
            found = self.foreign(node.value, scope)
            return found.then(' (an item)') if found and found.holder else found
        if isinstance(node, ast.NamedExpr):
            return self.foreign(node.value, scope)
        if isinstance(node, ast.IfExp):
            return self.foreign(node.body, scope) or self.foreign(node.orelse, scope)
        if isinstance(node, ast.BoolOp):
            for value in node.values:
                found = self.foreign(value, scope)
                if found:
                    return found
            return None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and self.lookup(func.id, scope) == 'builtin':
                if func.id in ('getattr', 'getattr_static') and len(node.args) >= 2:
                    base = self.foreign(node.args[0], scope)
                    return base.then(f'.{literal_str(node.args[1]) or "?"}') if base else None
                if func.id == 'vars' and node.args:
                    base = self.foreign(node.args[0], scope)
                    return base.then('.__dict__', drawn=True) if base else None
                if func.id in ('globals', 'locals', 'vars') and not node.args:
                    return Foreign(f'an entry of {func.id}()', 'namespace', drawn=True, holder=True)
                if func.id in PASS_THROUGH:
                    for arg in node.args:
                        found = self.foreign(arg, scope)
                        if found:
                            # A new container holding the same objects.
                            return found.then(f' (in {func.id}())', holder=True) if func.id in NEW_CONTAINERS else found.then('', holder=found.holder)
                return None
            if isinstance(func, ast.Attribute):
                if func.attr in ACCESSORS:
                    base = self.foreign(func.value, scope)
                    # `copy.copy(x)` is a module's function making something new, not an accessor of the module.
                    if base and base.module and isinstance(func.value, ast.Name):
                        return None
                    if base and base.holder and func.attr in ('get', 'pop', 'setdefault', '__getitem__'):
                        return base.then('[...]')
                    return base
                if func.attr in ('import_module',):
                    name = literal_str(node.args[0]) if node.args else None
                    return Foreign(name or 'a module imported by name', name or 'importlib', module=True)
            if isinstance(func, ast.Attribute) and func.attr == 'mro' and not node.args:
                return self.bases_of(func.value, scope, '__mro__')
            # A function of this file that returns something the package did not define.
            returned = self.returned(func, scope)
            if returned:
                return returned
            callee = self.foreign(func, scope)
            if callee and callee.drawn:
                return callee.then('(...)')
            return None
        return None

    def own_class(self, node, scope):
        """The ClassDef of this file that the expression is (the class, `X().__class__`, `type(X())`), or None."""
        if isinstance(node, ast.Name):
            bindings = self.lookup(node.id, scope)
            for b in bindings if isinstance(bindings, list) else []:
                if b[0] == 'def' and isinstance(b[1], ast.ClassDef):
                    return b[1]
            return None
        instance = node.value if isinstance(node, ast.Attribute) and node.attr == '__class__' else node.args[0] if isinstance(node, ast.Call) and self.is_builtin(node.func, scope, 'type') and len(node.args) == 1 else None
        if isinstance(instance, ast.Call):
            return self.own_class(instance.func, scope)
        return None

    def bases_of(self, node, scope, link):
        """A class of this file's bases (its __bases__, __mro__): foreign when one of them is (`class X(unittest.TestCase)`, then X.__bases__[0])."""
        cls = self.own_class(node, scope)
        if cls is None:
            return None
        outer = self.scope_for(self.parent.get(cls)) if cls in self.parent else self.scope_of[self.tree]
        for base in cls.bases:
            found = self.foreign(base, outer or self.scope_of[self.tree])
            if found:
                return Foreign(f'{cls.name}.{link} (holding {found.desc})', found.root, holder=True)
        return None

    def returned(self, func, scope):
        if not isinstance(func, ast.Name):
            return None
        bindings = self.lookup(func.id, scope)
        for b in bindings if isinstance(bindings, list) else []:
            fn = b[1] if b[0] == 'def' else b[1] if b[0] == 'assign' and isinstance(b[1], ast.Lambda) else None
            if not isinstance(fn, FUNCTION_SCOPES):
                continue
            key = ('returns', id(fn))
            if key in self.returns:
                if self.returns[key]:
                    return self.returns[key]
                continue
            if key in self.resolving:
                continue
            self.resolving.add(key)
            try:
                values = [fn.body] if isinstance(fn, ast.Lambda) else [n.value for n in ast.walk(fn) if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None]
                self.returns[key] = None
                for value in values:
                    found = self.foreign(value, self.scope_for(value) or self.defs[fn])
                    if found:
                        self.returns[key] = found.then(f' (returned by {func.id}())')
                        return self.returns[key]
            finally:
                self.resolving.discard(key)
        return None

    # --- where a name comes from ----------------------------------------------

    def name_handed_in(self, node, scope, depth=0):
        """True when an attribute name is a literal, a literal-prefixed name, a parameter, or an attribute, as generic code has them; False when it is computed in place."""
        if depth > 20:
            return False
        if literal_str(node) is not None or prefix_literal(node) or isinstance(node, ast.Attribute):
            return True
        if isinstance(node, ast.Constant) and node.value is None:
            return True
        if isinstance(node, ast.IfExp):
            return self.name_handed_in(node.body, scope, depth + 1) and self.name_handed_in(node.orelse, scope, depth + 1)
        if isinstance(node, ast.BoolOp):
            return all(self.name_handed_in(v, scope, depth + 1) for v in node.values)
        if isinstance(node, ast.Call) and self.is_builtin(node.func, scope, 'str') and len(node.args) == 1:
            return self.name_handed_in(node.args[0], scope, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ('lower', 'upper', 'strip', 'lstrip', 'rstrip', 'casefold') and not node.args:
            return self.name_handed_in(node.func.value, scope, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.iterable_handed_in(node.value, scope, depth + 1)
        if isinstance(node, ast.Name):
            key = ('name', id(scope), node.id)
            if key in self.resolving:
                return True
            self.resolving.add(key)
            try:
                bindings = self.lookup(node.id, scope)
                if not isinstance(bindings, list):
                    return False
                for b in bindings:
                    if b[0] == 'param':
                        continue
                    if b[0] in ('assign', 'default') and self.name_handed_in(b[1], b[2], depth + 1):
                        continue
                    if b[0] == 'iter' and self.iterable_handed_in(b[1], b[2], depth + 1):
                        continue
                    return False
                return True
            finally:
                self.resolving.discard(key)
        return False

    def iterable_handed_in(self, node, scope, depth):
        if depth > 20:
            return False
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self.name_handed_in(e, scope, depth + 1) for e in node.elts)
        if isinstance(node, ast.Attribute):
            return self.foreign(node, scope) is None
        if isinstance(node, ast.Subscript):
            return self.iterable_handed_in(node.value, scope, depth + 1)
        if isinstance(node, ast.Starred):
            return self.iterable_handed_in(node.value, scope, depth + 1)
        if isinstance(node, ast.Name):
            bindings = self.lookup(node.id, scope)
            if not isinstance(bindings, list):
                return False
            for b in bindings:
                if b[0] == 'param' or (b[0] in ('assign', 'default') and self.iterable_handed_in(b[1], b[2], depth + 1)):
                    continue
                return False
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if self.is_builtin(func, scope, 'dir', 'vars', 'globals', 'locals', 'sorted', 'list', 'tuple', 'reversed', 'enumerate', 'set', 'frozenset', 'zip', 'dict'):
                return all(self.foreign(a, scope) is None and (func.id in ('dir', 'vars') or self.iterable_handed_in(a, scope, depth + 1)) for a in node.args)
            if isinstance(func, ast.Attribute) and func.attr in ('keys', 'items', 'values'):
                return self.iterable_handed_in(func.value, scope, depth + 1)
        return False

    # --- the rules ------------------------------------------------------------

    def on_added_lines(self, node):
        start = getattr(node, 'lineno', None)
        if start is None:
            return False
        end = getattr(node, 'end_lineno', None) or start
        return any(line in self.added for line in range(start, end + 1)) if end - start < 200 else any(start <= line <= end for line in self.added)

    def refuse(self, node, why):
        raise Refusal(node.lineno, getattr(node, 'col_offset', 0), f'{self.path}:{node.lineno}: {why}')

    def check_target(self, node, target, scope, verb):
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.check_target(node, elt, scope, verb)
        elif isinstance(target, ast.Starred):
            self.check_target(node, target.value, scope, verb)
        elif isinstance(target, ast.Attribute):
            base = self.foreign(target.value, scope)
            if base and not base.holder:
                self.refuse(target, f'{verb} {base.desc}.{target.attr}, an attribute of an object the package did not define')
        elif isinstance(target, ast.Subscript):
            # An item of globals() is the module's own name; an item of what it holds is not the package's.
            base = self.foreign(target.value, scope)
            if base and not base.holder:
                self.refuse(target, f'{verb} an item of {base.desc}, an object the package did not define')

    def mutated_params(self):
        """For each function of the file, the positions and names of the parameters whose attributes or items it changes (directly or through another such function)."""
        summary = {fn: set() for fn in self.defs}
        changed = True
        while changed:
            changed = False
            for fn, scope in self.defs.items():
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                for node in ast.walk(fn):
                    for victim in self.mutation_victims(node, summary):
                        if isinstance(victim, ast.Name) and victim.id in params and self.lookup(victim.id, self.scope_of.get(node, scope)) and victim.id not in summary[fn]:
                            summary[fn].add(victim.id)
                            changed = True
        return summary

    def mutation_victims(self, node, summary):
        """The expressions whose attributes or items `node` changes."""
        out = []
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and getattr(node, 'value', 1) is not None else []
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                out.append(t.value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ('setattr', 'delattr') and node.args:
                out.append(node.args[0])
            elif isinstance(func, ast.Attribute) and func.attr in ('__setattr__', '__delattr__', '__setitem__', '__delitem__') and isinstance(func.value, ast.Name) and func.value.id in ('object', 'type', 'dict', 'list') and node.args:
                out.append(node.args[0])
            elif isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                out.append(func.value)
            elif isinstance(func, ast.Name):
                for fn, params in summary.items():
                    if getattr(fn, 'name', None) == func.id and params:
                        names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                        out.extend(arg for i, arg in enumerate(node.args) if i < len(names) and names[i] in params)
                        out.extend(k.value for k in node.keywords if k.arg in params)
        return out

    def check(self):
        summary = self.mutated_params()
        local_defs = {}
        for fn, params in summary.items():
            if params and hasattr(fn, 'name'):
                local_defs.setdefault(fn.name, []).append((fn, params))
        found = []
        for node in ast.walk(self.tree):
            if not self.on_added_lines(node):
                continue
            try:
                self.check_node(node, local_defs)
            except Refusal as refusal:
                found.append(refusal.args)
        # An unchanged line that changes an object the patch rebound (`Thing.run = f` kept, `Thing` now imported from unittest).
        for node in ast.walk(self.tree):
            if not isinstance(node, MUTATION_NODES) or self.on_added_lines(node):
                continue
            self.tracking, self.touched = True, False
            try:
                self.check_node(node, local_defs)
            except Refusal as refusal:
                if self.touched:
                    found.append(refusal.args[:2] + (refusal.args[2] + ' (bound on a line the patch changed)',))
            finally:
                self.tracking = False
        if found:
            # The first by line; the walk is breadth-first, so sort.
            found = sorted(set(found))
            more = f' (and {len(found) - 1} more in this file)' if len(found) > 1 else ''
            raise Refusal(found[0][0], found[0][1], found[0][2] + more)

    def check_node(self, node, local_defs):
        scope = self.scope_of.get(node) or self.scope_for(node) or self.scope_of[self.tree]
        if isinstance(node, (ast.Assign, ast.Delete)):
            for target in node.targets:
                self.check_target(node, target, scope, 'deletes' if isinstance(node, ast.Delete) else 'assigns to')
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            self.check_target(node, node.target, scope, 'assigns to')
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            self.check_target(node.target if hasattr(node.target, 'lineno') else node, node.target, scope, 'assigns to')
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self.check_target(node.optional_vars, node.optional_vars, scope, 'assigns to')
        elif isinstance(node, ast.Call):
            self.check_call(node, scope, local_defs)
        elif isinstance(node, ast.Name):
            self.check_name(node, scope)
        elif isinstance(node, ast.Attribute):
            self.check_attribute(node, scope)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.check_string(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                parts = (getattr(node, 'module', None) or '').split('.') + alias.name.split('.')
                hit = next((p for p in parts if p in FORBIDDEN_ATTRIBUTES or p in FOREIGN_ONLY_ATTRIBUTES), None)
                if hit and (node.level if isinstance(node, ast.ImportFrom) else 0) == 0:
                    self.refuse(node, f'imports {hit}, which reaches into the test runner, the import system or the interpreter')

    def scope_for(self, node):
        while node is not None and node not in self.scope_of:
            node = self.parent.get(node)
        return self.scope_of.get(node) if node is not None else None

    def check_name(self, node, scope):
        if node.id in ('__import__', '__builtins__') and self.lookup(node.id, scope) == 'builtin':
            self.refuse(node, f'uses {node.id}, which reaches any module')
        if node.id in CALL_ONLY and self.lookup(node.id, scope) == 'builtin':
            parent = self.parent.get(node)
            if not (isinstance(parent, ast.Call) and parent.func is node):
                self.refuse(node, f'passes the builtin {node.id} around as a value (a later call would hide what it reaches)')

    def check_attribute(self, node, scope):
        if node.attr in FORBIDDEN_ATTRIBUTES or (node.attr in FOREIGN_ONLY_ATTRIBUTES and self.foreign(node.value, scope)):
            self.refuse(node, f'reaches .{node.attr}, the test runner, the import system, frames or the interpreter\'s hooks')
        if node.attr == '__dict__':
            base = self.foreign(node.value, scope)
            if base and (base.dangerous or not base.module):
                self.refuse(node, f'reads {base.desc}.__dict__, the namespace of an object the package did not define')
        if node.attr in ('__setattr__', '__delattr__', '__getattribute__', 'getattr_static', 'attrgetter', 'methodcaller'):
            parent = self.parent.get(node)
            if not (isinstance(parent, ast.Call) and parent.func is node):
                base = self.foreign(node.value, scope)
                if base:
                    self.refuse(node, f'takes {base.desc}.{node.attr} as a value (a later call would hide what it reaches)')

    def check_string(self, node):
        value = node.value
        if len(value) > 200 or not value.replace('.', '').replace('_', 'a').isalnum():
            return
        hit = next((p for p in value.split('.') if p in FORBIDDEN_ATTRIBUTES or p in FOREIGN_ONLY_ATTRIBUTES), None)
        if hit:
            self.refuse(node, f'names {hit} in a string ({value!r}), which reaches into the test runner, the import system or the interpreter')

    def check_call(self, node, scope, local_defs):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        builtin = isinstance(func, ast.Name) and self.lookup(func.id, scope) == 'builtin'
        if builtin and name in ('exec', 'eval', 'compile'):
            self.refuse(node, f'calls {name}, which runs code built at run time')
        if builtin and name == '__import__':
            self.refuse(node, 'calls __import__, which imports a module by a name given at run time')
        if name == 'import_module' and not (node.args and literal_str(node.args[0])):
            self.refuse(node, 'imports a module by a name computed at run time')
        # getattr and its kin: the name must be a literal, or handed in by a caller; never computed from data here.
        if name in GETATTR_LIKE and (builtin or isinstance(func, ast.Attribute) or name in ('getattr_static', 'attrgetter', 'methodcaller')):
            position = GETATTR_LIKE[name]
            bound = isinstance(func, ast.Attribute) and name.startswith('__') and not (isinstance(func.value, ast.Name) and func.value.id in ('object', 'type'))
            if bound:
                position -= 1
            obj = func.value if bound else (node.args[0] if node.args and name not in ('attrgetter', 'methodcaller') else None)
            name_arg = node.args[position] if len(node.args) > position else None
            if name_arg is not None:
                attr = literal_str(name_arg)
                if attr is not None:
                    if attr in FORBIDDEN_ATTRIBUTES or attr in FOREIGN_ONLY_ATTRIBUTES:
                        self.refuse(node, f'reaches .{attr} through {name}, the test runner, the import system, frames or the interpreter\'s hooks')
                elif name != 'hasattr':
                    # Generic code reads names handed in from math or str; from sys, the test machinery or what reflection handed out, it reaches anything.
                    base = self.foreign(obj, scope) if obj is not None else None
                    if base and base.dangerous:
                        self.refuse(node, f'calls {name} on {base.desc}, with an attribute name computed at run time: it can reach the test runner or the import system')
                    if not prefix_literal(name_arg) and not self.name_handed_in(name_arg, scope):
                        self.refuse(node, f'calls {name} with an attribute name computed here ({ast.unparse(name_arg)[:80]}); a name decoded from data can reach anything')
            if name in ('setattr', 'delattr', '__setattr__', '__delattr__') and obj is not None:
                base = self.foreign(obj, scope)
                if base:
                    self.refuse(node, f'{"sets" if "set" in name else "deletes"} an attribute of {base.desc} through {name}, an object the package did not define')
        if builtin and name == 'vars' and node.args:
            base = self.foreign(node.args[0], scope)
            if base and not (base.module and isinstance(node.args[0], ast.Name) and base.root.split('.')[0] in VARS_ALLOWED and '.' not in base.root):
                self.refuse(node, f'reads the namespace of {base.desc} with vars(), an object the package did not define')
        if builtin and name in ('globals', 'locals', 'vars') and not node.args:
            parent = self.parent.get(node)
            if isinstance(parent, ast.Subscript) and parent.value is node and not self.name_handed_in(parent.slice, scope):
                self.refuse(node, f'reads {name}() by a key computed here ({ast.unparse(parent.slice)[:80]})')
        # Changing a foreign object through a method: the receiver is foreign (an attribute reached from an import, an alias, a namespace entry).
        if isinstance(func, ast.Attribute) and name in MUTATORS:
            receiver = func.value
            base = self.foreign(receiver, scope)
            # `os.remove(p)`, `dict.update(self, x)`: a module's function or a class's unbound method changes its first argument, if anything.
            imported_module = isinstance(receiver, ast.Name) and any(b[0] == 'import' and b[4] is None and b[1].split('.')[0] == receiver.id for b in (self.lookup(receiver.id, scope) or []) if isinstance(b, tuple))
            bare = base is not None and isinstance(receiver, ast.Name) and base.module and (imported_module or not base.dangerous)
            bare = bare or self.is_builtin(receiver, scope, 'object', 'type', 'dict', 'list', 'set', 'frozenset', 'bytearray', 'super')
            if base is not None and base.holder:
                pass
            elif bare:
                victim = self.foreign(node.args[0], scope) if node.args else None
                if victim:
                    self.refuse(node, f'changes {victim.desc} through {ast.unparse(func)[:80]}, an object the package did not define')
            elif base:
                self.refuse(node, f'changes {base.desc} through .{name}(), an object the package did not define')
        # Handing a foreign object to a function of this file that changes its parameter's attributes or items.
        if isinstance(func, ast.Name) and func.id in local_defs:
            for fn, params in local_defs[func.id]:
                names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                handed = [(names[i], a) for i, a in enumerate(node.args) if i < len(names)] + [(k.arg, k.value) for k in node.keywords]
                for param, arg in handed:
                    base = self.foreign(arg, scope) if param in params else None
                    if base:
                        self.refuse(node, f'passes {base.desc} to {func.id}(), which changes its parameter {param}: an object the package did not define')
        # Handing the test or import machinery to code that is not a plain builtin: it could change it out of this check's sight.
        if not (builtin and name in SAFE_CALLEES):
            for arg in list(node.args) + [k.value for k in node.keywords]:
                base = self.foreign(arg, scope)
                if base and (base.root.split('.')[0] in ('unittest', 'pytest', '_pytest', 'pluggy', 'doctest', 'builtins', '__builtin__', 'importlib')):
                    self.refuse(node, f'passes {base.desc} to {ast.unparse(func)[:80]}: the test or import machinery, out of this check\'s sight')


class Project:
    """The package's files as the checker finds them in the tree after the patch: parsed once each, to follow imports between them."""

    def __init__(self, package_names):
        self.package_names = package_names
        self.checkers = {}
        self.resolving = set()

    def root_of(self, path):
        """The folder the package's top-level names are in (`src` for src/attr/_make.py), '' for the current folder."""
        parts = path.split('/')
        for i, part in enumerate(parts):
            if part in self.package_names or (i == len(parts) - 1 and part.endswith('.py') and part[:-3] in self.package_names):
                return '/'.join(parts[:i])
        return '/'.join(parts[:-1])

    def file_of(self, root, dotted):
        if not dotted or dotted.split('.')[0] not in self.package_names:
            return None
        base = os.path.join(root, *dotted.split('.')) if root else os.path.join(*dotted.split('.'))
        for candidate in (base + '.py', os.path.join(base, '__init__.py')):
            if os.path.isfile(candidate) and not os.path.islink(candidate):
                return candidate
        return None

    def parse(self, path):
        """The file's syntax tree; a Refusal when it cannot be read or parsed within the limits, None when Python cannot compile it."""
        try:
            with open(path, 'rb') as handle:
                source = handle.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise Refusal(0, 0, f'{path}: cannot be read to check it ({err.strerror})')
        if len(source) > MAX_FILE_BYTES:
            raise Refusal(0, 0, f'{path}: larger than {MAX_FILE_BYTES} bytes, too large to check')
        try:
            return ast.parse(source, filename=path)
        except SyntaxError:
            # Python cannot compile it either, so it cannot run: nothing to check (the tests will say so).
            return None
        except (RecursionError, MemoryError, ValueError) as err:
            raise Refusal(0, 0, f'{path}: nested too deeply or too large to parse ({type(err).__name__})')

    def checker(self, path, added=frozenset()):
        path = os.path.normpath(path)
        if path not in self.checkers:
            self.checkers[path] = None
            tree = self.parse(path)
            if tree is not None:
                checker = Checker(path, tree, added, self)
                checker.build_scopes()
                self.checkers[path] = checker
        checker = self.checkers[path]
        if checker is not None and added:
            checker.added = added
        return checker


def check_file(project, path, added):
    try:
        checker = project.checker(path, added)
        if checker is not None:
            checker.check()
    except Refusal as refusal:
        return refusal.args[2]
    except (RecursionError, MemoryError):
        return f'{path}: nested too deeply to check'
    return None


def main(argv):
    if len(argv) != 2:
        print('usage: answer_ast.py REQUEST.json', file=sys.stderr)
        return 2
    with open(argv[1], encoding='utf-8') as handle:
        request = json.load(handle)
    project = Project(set(request['package_names']))
    refused = None
    for entry in request['files']:
        refused = check_file(project, entry['path'], set(entry['added']))
        if refused:
            break
    print('HARNESS-S-AST ' + json.dumps({'refused': refused}))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
