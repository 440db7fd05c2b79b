from src.calc import Calculator, add


def test_add():
    assert add(2, 3) == 5


def test_push():
    c = Calculator()
    assert c.push(4) == 4
