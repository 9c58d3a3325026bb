"""The one optional native part: on Linux, engine/_row_gemm.c (see that file), built at
install time. Where it cannot be built (no compiler), the install goes on without it."""

import sys

from setuptools import Extension, setup

extensions = []
if sys.platform.startswith("linux"):
    extensions.append(
        Extension(
            "engine._row_gemm",
            ["engine/_row_gemm.c"],
            libraries=["dl"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    )

setup(ext_modules=extensions)
