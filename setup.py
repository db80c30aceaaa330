"""The parts of the build pyproject.toml cannot state: the import names and the ledger's C.

The folders ``proxy/``, ``protocol/``, ``pipeline/`` and ``simulator/`` install under one
namespace, ``rackguard`` (``rackguard.proxy``, ``rackguard.protocol``, ...), so no generic
top-level name (``protocol``, ``pipeline``) can collide with another installed distribution.

The ledger's optional row encoder and completion path is C, ``optional=True``: without a C
compiler the install still succeeds, and the ledger encodes rows in Python (and says so in
its log when it starts).
"""

from setuptools import Extension, find_packages, setup

ROOTS = ("proxy", "protocol", "pipeline", "simulator")

setup(
    package_dir={f"rackguard.{root}": root for root in ROOTS},
    packages=[f"rackguard.{root}{'.' + sub if sub else ''}"
              for root in ROOTS for sub in ("", *find_packages(root))],
    ext_modules=[
        Extension(
            "rackguard.proxy.ledger._ledger_native",
            ["proxy/ledger/_ledger_native.c", "proxy/ledger/_ledger_completion.c"],
            depends=["proxy/ledger/_ledger_native.h"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
    ],
)
