"""The one swap every speed step is made of: replace, in place, the child cells of a built model that a
test picks, each distinct cell once (``accelerate``, ``use_mindspore_ops``, ``use_bf16_gemms``,
``quantize_int8``).

Layer: ``albert_min.model.kernels``; imports nothing of the package.
"""


def swap_cells(model, wanted, make):
    """Replace every child cell ``c`` of ``model`` with ``wanted(c)`` true by ``make(c)``. A cell held in
    several places (ALBERT's one shared layer, looped L times) gets ONE replacement, put in each place,
    so it stays shared. Every parameter keeps its name (``setattr`` on a parent prefixes the names of
    the cell it is given): the model's own, and any the replacements bring. Returns how many distinct
    cells were replaced."""
    names = [(p, p.name) for p in model.get_parameters()]
    swapped = {}                                    # id(cell) -> (its replacement, the replacement's names)
    for _, cell in list(model.cells_and_names()):
        for name, child in list(cell.name_cells().items()):
            if not wanted(child):
                continue
            if id(child) not in swapped:
                replacement = make(child)
                swapped[id(child)] = replacement, [(p, p.name) for p in replacement.get_parameters()]
            replacement, its_names = swapped[id(child)]
            setattr(cell, name, replacement)
            for param, param_name in its_names:
                param.name = param_name
    for param, param_name in names:
        param.name = param_name
    return len(swapped)
