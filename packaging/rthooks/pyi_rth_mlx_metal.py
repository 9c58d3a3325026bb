# PyInstaller run-time hook (macOS): make MLX find its Metal library in the bundle.
#
# MLX looks for mlx.metallib in the folder of the loaded libmlx.dylib (dladdr). The bundle
# keeps both in Contents/Frameworks/mlx/lib/, but PyInstaller also links libmlx.dylib into
# the top of Contents/Frameworks, where there is no metallib; if the extension module
# binds to that path, MLX reports "Failed to load the default metallib". Loading the
# library first by its real mlx/lib path makes that the one image every later reference
# (same install name) resolves to. Runs before any user code, so before `import mlx`.
import os
import sys

if sys.platform == "darwin":
    import ctypes

    _lib = os.path.join(getattr(sys, "_MEIPASS", ""), "mlx", "lib", "libmlx.dylib")
    if os.path.exists(_lib):
        try:
            ctypes.CDLL(os.path.realpath(_lib), mode=os.RTLD_GLOBAL)
        except OSError:
            pass  # the normal import path will report a real problem
