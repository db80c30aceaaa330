"""The one part of the build pyproject.toml cannot state: the ledger's optional C row encoder.

``optional=True``: without a C compiler the install still succeeds, and the ledger encodes
rows in Python (and says so in its log when it starts).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proxy.ledger._ledger_native",
            ["proxy/ledger/_ledger_native.c", "proxy/ledger/_ledger_completion.c"],
            depends=["proxy/ledger/_ledger_native.h"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
    ],
)
