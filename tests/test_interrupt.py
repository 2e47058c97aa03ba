"""``vcmc.interrupt.interruptible``: the call's value and errors come back; in a worker thread it is a plain call."""

import threading

import pytest

from vcmc.interrupt import interruptible


def test_value_and_error_come_back_from_the_worker_thread():
    seen = []
    assert interruptible(lambda a, b=0: (seen.append(threading.current_thread().name), a + b)[1], 2, b=3) == 5
    assert seen == ["vcmc-interruptible"]
    with pytest.raises(ZeroDivisionError):
        interruptible(lambda: 1 / 0)


def test_outside_the_main_thread_it_is_a_plain_call():
    names = []
    t = threading.Thread(target=lambda: names.append(interruptible(lambda: threading.current_thread().name)))
    t.start()
    t.join()
    assert names == [t.name]
