"""The C part of the build: the ledger's optional row encoder and completion path
(all else is in pyproject.toml).

``optional=True``: without a C compiler the install still succeeds, and the
ledger encodes rows in Python (and says so in its log when it starts).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proxy._ledger_native",
            ["proxy/_ledger_native.c", "proxy/_ledger_completion.c"],
            depends=["proxy/_ledger_native.h"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
    ]
)
