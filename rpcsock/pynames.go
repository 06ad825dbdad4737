package rpcsock

// Python names a stub function must not take (keywords, soft keywords and
// builtins of CPython 3.8 to 3.13), so that generated code parses and the
// module's own use of builtins is never shadowed.
var (
	pyKeywords = setOf("False", "None", "True", "and", "as", "assert", "async", "await",
		"break", "class", "continue", "def", "del", "elif", "else", "except", "finally",
		"for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
		"or", "pass", "raise", "return", "try", "while", "with", "yield",
		"match", "case", "type")
	pyBuiltins = setOf("abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool",
		"breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile",
		"complex", "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate",
		"eval", "exec", "exit", "filter", "float", "format", "frozenset", "getattr",
		"globals", "hasattr", "hash", "help", "hex", "id", "input", "int", "isinstance",
		"issubclass", "iter", "len", "license", "list", "locals", "map", "max",
		"memoryview", "min", "next", "object", "oct", "open", "ord", "pow", "print",
		"property", "quit", "range", "repr", "reversed", "round", "set", "setattr",
		"slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "vars", "zip",
		"Ellipsis", "NotImplemented",
		"ArithmeticError", "AssertionError", "AttributeError", "BaseException",
		"BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError",
		"BytesWarning", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
		"ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning",
		"EOFError", "EncodingWarning", "EnvironmentError", "Exception", "ExceptionGroup",
		"FileExistsError", "FileNotFoundError", "FloatingPointError", "FutureWarning",
		"GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError",
		"IndexError", "InterruptedError", "IsADirectoryError", "KeyError",
		"KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError",
		"NameError", "NotADirectoryError", "NotImplementedError", "OSError",
		"OverflowError", "PendingDeprecationWarning", "PermissionError",
		"ProcessLookupError", "PythonFinalizationError", "RecursionError",
		"ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning",
		"StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning",
		"SystemError", "SystemExit", "TabError", "TimeoutError", "TypeError",
		"UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
		"UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
		"Warning", "ZeroDivisionError")
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
