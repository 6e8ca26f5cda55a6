"""Native code ember generates for its eager ops (C text made at run time, built by the compiler's build
layer): ``eager_kernels`` holds the callable side, ``eager_source`` the C."""
