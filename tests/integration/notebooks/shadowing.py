# %% succeeded
str = "x"
len = 3
sum = 0
input = "q"
list = [1, 2]
dict = {"a": 1}
repr = "r"
isinstance = 1
# %% failed exception=ValueError stderr~"invalid literal"
int("abc")
# %% succeeded result="6"
6
# %% succeeded result="[1, 2]"
list
# %% failed exception=TypeError
len("abc")
# %% succeeded result="3"
del len
len("abc")
# %% failed exception=NameError
undefined_name + 1
# %% succeeded stdout~"still here"
print("still here", sum, input)
# %% succeeded result="'x'"
str
# %% succeeded result~"<class 'str'>"
del str
__builtins__.str if hasattr(__builtins__, "str") else __builtins__["str"]
# %% failed exception=SystemError
class Weird(Exception):
    def __str__(self):
        return "weird " * 3
raise SystemError("boom")
# %% failed exception=Weird stderr~"weird weird"
raise Weird()
