"""Sphinx extension: with ``hide_solutions = True``, drop gated solutions entirely.

sphinx-exercise 1.2.1 honours ``hide_solutions`` for ``{solution}`` directives, but for the
gated form (``{solution-start}`` ... ``{solution-end}``, which the chapters use so that
solution code cells run in the build) its ``solution-start`` directive returns nothing,
so the text and code cells between the two markers stay on the page, unmarked.  This
extension replaces ``solution-start`` with a version that, when solutions are hidden,
leaves a marker; a transform then removes everything from the marker to the matching
``solution-end``.  With ``hide_solutions = False`` it changes nothing.

Used by ``bash scripts/course.sh instructor-book`` (the book without solutions).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform
from sphinx_exercise.directive import SolutionStartDirective
from sphinx_exercise.nodes import solution_end_node


class hidden_solution_start(nodes.Element):
    """Marks where a hidden gated solution starts; removed before writing."""


class HiddenSolutionStartDirective(SolutionStartDirective):
    def run(self):
        out = super().run()  # keeps sphinx-exercise's bookkeeping of gated directives
        if self.env.app.config.hide_solutions:
            return [hidden_solution_start(label=self.arguments[0])]
        return out


class RemoveHiddenSolutions(SphinxTransform):
    # before sphinx-exercise merges gated solutions (priority 10)
    default_priority = 5

    def apply(self):
        for start in list(self.document.findall(hidden_solution_start)):
            parent = start.parent
            i = parent.index(start)
            end = next((j for j in range(i + 1, len(parent))
                        if isinstance(parent[j], solution_end_node)), None)
            if end is None:
                raise ExtensionError(
                    f"{self.env.docname}: no solution-end after the solution to "
                    f"{start['label']} at the same level (a heading inside a solution?)")
            for child in list(parent.children[i:end + 1]):
                parent.remove(child)


def setup(app):
    app.setup_extension("sphinx_exercise")
    app.add_directive("solution-start", HiddenSolutionStartDirective, override=True)
    app.add_node(hidden_solution_start)
    app.add_transform(RemoveHiddenSolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
