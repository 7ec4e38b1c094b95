"""Bindings of the explore agent's tools: the evolve agent's own implementations
(`evolve_agent.tools_impl`), so reads, writes and records are confined and validated the same
way. No shell and no delete: the explore agent only adds skills."""

from evolve_agent import tools_impl as _impl
from evolve_agent.context import get_context as _ctx


def list_files(path: str = ".", depth: int = 2, *, state, session):
    return _impl.list_files(_ctx(state), session, path=path, depth=depth)


def read_file(path: str, start_line: int = 1, end_line: int | None = None, *, state, session):
    return _impl.read_file(_ctx(state), session, path=path, start_line=start_line, end_line=end_line)


def grep(pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False,
         max_results: int = 100, *, state, session):
    return _impl.grep(_ctx(state), session, pattern=pattern, path=path, glob=glob,
                      ignore_case=ignore_case, max_results=max_results)


def write_file(path: str, content: str, *, state, session):
    return _impl.write_file(_ctx(state), session, path=path, content=content)


def edit_file(path: str, old_string: str, new_string: str, replace_all: bool = False, *, state, session):
    return _impl.edit_file(_ctx(state), session, path=path, old_string=old_string,
                           new_string=new_string, replace_all=replace_all)


def record_change(*, state, session, **entry):
    return _impl.record_change(_ctx(state), session, **entry)


def finish(message: str = "", *, state, session):
    return _impl.finish(_ctx(state), session, message=message)
