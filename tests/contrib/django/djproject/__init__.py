"""A small Django project for the tests of tidings.contrib.django."""
