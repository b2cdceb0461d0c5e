def test_script_imports_without_torch_and_has_main():
    from hardware import measure_attention

    assert callable(measure_attention.main)
    assert "calibrat" in (measure_attention.__doc__ or "")
