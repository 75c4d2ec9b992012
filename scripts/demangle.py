"""C++ names for the scripts that read ptxas / cuobjdump output (ptxas-report, sass-loops, dependent-nc-loads)."""
import subprocess


def demangle(names):
    """c++filt's names for a list of mangled ones, in order; the mangled names where c++filt is missing or fails."""
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return r.stdout.split("\n")[: len(names)]
    except (OSError, subprocess.CalledProcessError):
        return names
