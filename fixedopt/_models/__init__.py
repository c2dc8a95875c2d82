"""fixedopt.models: lmfit's vocabulary (models, named parameters, lineshapes), batched."""
