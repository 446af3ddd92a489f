#!/usr/bin/env bash
# Course materials from the book's own sources (see book/course.md):
#   bash scripts/course.sh instructor-book     the book without solutions
#                                              -> _build/book-without-solutions/_build/html
#   bash scripts/course.sh student-notebooks   one .ipynb per chapter, solutions removed
#                                              -> _build/student-notebooks/ (glued values
#                                              from the book's execution cache: build the
#                                              book first, or add --execute)
#   bash scripts/course.sh assignments         otter-grader student notebooks + autograders
#                                              -> _build/assignments/<name>/dist/
#   bash scripts/course.sh grade ZIP NOTEBOOK  grade one submission locally (otter run)
#                                              -> results beside dist/student/, never in
#                                              it: dist/grades/<notebook>/ (--out: elsewhere)
#   bash scripts/course.sh all                 the first three
# Each sets up .venv like scripts/book.sh; the assignments also install
# requirements-course.txt (otter-grader). Extra arguments go to the underlying command
# (e.g. `student-notebooks --ref <commit>`).
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

course_requirements() {
  local stamp="$VENV/.qtheory-course-stamp" want
  want="$(sha256sum requirements-course.txt | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[qtheory] installing requirements-course.txt (otter-grader; first run: about a minute)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-course.txt
    echo "$want" > "$stamp"
  fi
}

instructor_book() {
  local out="_build/book-without-solutions"
  qtheory_ensure_dot
  mkdir -p "$out"
  python scripts/course_config.py "$out/_config.yml"
  local start; start=$(date +%s)
  jupyter-book build --all -W --keep-going . --config "$out/_config.yml" --path-output "$out" "$@"
  # self-check: no solution (sphinx-exercise marks them with these classes/ids) and no
  # copy of the sources (they contain the solutions) in the published folder
  if grep -rlE 'solution-content|class="[^"]*solution[ "]' "$out/_build/html" --include='*.html' \
     || [ -d "$out/_build/html/_sources" ]; then
    echo "[qtheory] the book without solutions still contains solutions or sources" >&2
    exit 1
  fi
  echo "[qtheory] book without solutions built in $(( $(date +%s) - start )) s:" \
       "open $out/_build/html/index.html"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  instructor-book) instructor_book "$@" ;;
  student-notebooks)
    echo "[qtheory] the notebooks install: $(python -c 'import sys; sys.path.insert(0, "scripts"); import student_notebooks as s; v = s.qtheory_version(); print(s.install_spec(v, s.repository_url(), "v" + v))') (unless --ref is given)"
    python scripts/student_notebooks.py "$@" ;;
  assignments) course_requirements; python scripts/assignments.py build "$@" ;;
  grade)
    course_requirements
    # results outside the students' folder: <...>/dist/student/x.ipynb -> <...>/dist/grades/x
    case " $* " in
      *" --out "*|*" --out="*) ;;
      *) if [ $# -ge 2 ]; then
           nb_dir="$(dirname "$2")"; nb_stem="$(basename "$2" .ipynb)"
           if [ "$(basename "$nb_dir")" = student ]; then
             set -- "$@" --out "$(dirname "$nb_dir")/grades/$nb_stem"
           else
             set -- "$@" --out "$nb_dir/grades/$nb_stem"
           fi
         fi ;;
    esac
    python scripts/assignments.py grade "$@" ;;
  requirements) course_requirements ;;
  all)
    instructor_book
    python scripts/student_notebooks.py
    course_requirements
    python scripts/assignments.py build ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || { echo "unknown command: $cmd"; exit 2; }
    exit 2 ;;
esac
